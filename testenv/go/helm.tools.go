//go:build tools

// Keeps helm's command package in the build list; `go build helm.sh/helm/v3/cmd/helm` builds it.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
