// Throw-away module that builds cert-manager's own controllers (github.com/cert-manager/cert-manager,
// the main module: its cmd/controller is a separate module the proxy does not serve) behind a small
// main of ours (testenv/go/cert-manager.main.go), for the tests that have cert-manager issue the
// Secrets the service-controller uploads. `go mod tidy` writes the rest.
module testenv.local/cert-manager

go 1.26.0

require github.com/cert-manager/cert-manager v1.21.2
