// Throw-away module that builds the skaffold CLI through the Go module proxy (chart tests:
// `skaffold diagnose` and `skaffold render` of skaffold.yaml). replace and exclude only apply in the
// main module, so skaffold's own are repeated here (from its go.mod at the same version).
module testenv.local/skaffold

go 1.26.0

require github.com/GoogleContainerTools/skaffold/v2 v2.16.1

exclude github.com/karrick/godirwalk v1.17.0

replace (
	github.com/alessio/shellescape => github.com/alessio/shellescape v1.4.2
	github.com/buildpacks/lifecycle => github.com/buildpacks/lifecycle v0.20.5
	github.com/docker/cli => github.com/docker/cli v27.5.1+incompatible
	github.com/docker/docker => github.com/docker/docker v27.5.1+incompatible
	github.com/imdario/mergo => github.com/imdario/mergo v0.3.16
	github.com/spf13/viper => github.com/spf13/viper v1.19.0
)
