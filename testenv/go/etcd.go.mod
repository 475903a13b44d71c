// Throw-away module that builds etcd through the Go module proxy (3.6 has --unsafe-no-fsync).
module testenv.local/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 v3.6.14
