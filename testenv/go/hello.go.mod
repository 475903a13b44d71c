module testenv.local/hello

go 1.26.0
