module testenv.local/pause

go 1.26.0
