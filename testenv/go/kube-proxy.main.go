// kube-proxy, built from k8s.io/kubernetes with the same go.mod as kube-apiserver (see binaries.rs), for
// `cargo xtask cluster`. As upstream's cmd/kube-proxy/kube-proxy.go.
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
