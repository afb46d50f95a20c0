//go:build tools

// Package tools pins the Helm CLI that scripts/setup.sh builds into
// .tools/bin/helm for the chart tests (helm lint, helm template).
package tools

import _ "helm.sh/helm/v3/cmd/helm"
