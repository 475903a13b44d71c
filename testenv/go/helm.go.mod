// Throw-away module that builds the helm CLI through the Go module proxy (chart tests: lint,
// template, schema). helm has no replace directives, so requiring it is enough.
module testenv.local/helm

go 1.26.0

require helm.sh/helm/v3 v3.22.0
