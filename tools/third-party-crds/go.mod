// Pins the Go modules whose source carries the third-party CRDs our rendered
// resources are validated against; go.sum verifies every byte. Nothing is
// built from here: scripts/setup.sh downloads these modules and copies the
// CRD files it names into the git-ignored .tools/crds.
//
// LeaderWorkerSet is pinned at v0.9.0 because the Go module proxy refuses
// v0.10.0 ("403 Forbidden: This module version is not available"); see
// design/tooling.md.
module modelplane.ai/tools/third-party-crds

go 1.26.0

require (
	github.com/crossplane-contrib/provider-kubernetes v1.2.1
	sigs.k8s.io/lws v0.9.0
)
