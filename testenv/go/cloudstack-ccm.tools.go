//go:build tools

// Keeps the CCM's command package in the build list; `go build .../cmd/cloudstack-ccm` builds it.
package tools

import _ "github.com/apache/cloudstack-kubernetes-provider/cmd/cloudstack-ccm"
