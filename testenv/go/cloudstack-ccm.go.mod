// Throw-away module that builds the upstream CloudStack CCM (apache/cloudstack-kubernetes-provider)
// through the Go module proxy, for the side-by-side tests against our CloudStack provider. Its
// go.mod has replace directives, so `go install …@v1.2.0` refuses; replace only applies in the main
// module, so its own are repeated here (from its go.mod at the same version). The checksum database
// has no entry for github.com/apache modules: the build sets GONOSUMDB for them, and go.sum pins
// their hashes (testenv/go/cloudstack-ccm.go.sum).
module testenv.local/cloudstack-ccm

go 1.26.0

require github.com/apache/cloudstack-kubernetes-provider v1.2.0

replace (
	golang.org/x/sync => golang.org/x/sync v0.0.0-20181108010431-42b317875d0f
	golang.org/x/sys => golang.org/x/sys v0.0.0-20220502124256-b6088ccd6cba
	golang.org/x/tools => golang.org/x/tools v0.0.0-20190313210603-aa82965741a9
	k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.24.17
)

replace k8s.io/kubectl => k8s.io/kubectl v0.24.17

replace k8s.io/sample-cli-plugin => k8s.io/sample-cli-plugin v0.24.17

replace k8s.io/sample-controller => k8s.io/sample-controller v0.24.17

replace k8s.io/component-helpers => k8s.io/component-helpers v0.24.17

replace k8s.io/controller-manager => k8s.io/controller-manager v0.24.17

replace k8s.io/mount-utils => k8s.io/mount-utils v0.24.17
