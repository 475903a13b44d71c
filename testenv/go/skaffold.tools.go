//go:build tools

// Keeps skaffold's command package in the build list; `go build .../cmd/skaffold` builds it.
package tools

import _ "github.com/GoogleContainerTools/skaffold/v2/cmd/skaffold"
