//! A real etcd + kube-apiserver on 127.0.0.1 for tests.
