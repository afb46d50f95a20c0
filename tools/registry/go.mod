// Pins the OCI registry that serves the function packages to Crossplane's
// package manager in the e2e suite (plain HTTP on 127.0.0.1).
module modelplane.ai/tools/registry

go 1.25.0

tool github.com/google/go-containerregistry/cmd/registry

require github.com/google/go-containerregistry v0.21.6 // indirect
