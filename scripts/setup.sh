#!/usr/bin/env bash
# Set up a fresh machine: uv, the Python workspace, and the real Crossplane
# CLI (plus the core binary it renders with, since no Docker runs here).
# Idempotent: each step is skipped when its result is already present.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.9

# Debian tools for `make packages` and the package tests (see design/tooling.md):
# mmdebstrap builds the runtime bases, bubblewrap sandboxes uv and runs the
# packaged functions, umoci and skopeo assemble the images, openssl makes
# the test certificates, qemu-user-static runs the arm64 images in the
# package tests. apt-get update runs once, and only if one is missing.
DEBIAN_TOOLS=(mmdebstrap:mmdebstrap bubblewrap:bwrap umoci:umoci skopeo:skopeo openssl:openssl
  util-linux:setpriv qemu-user-static:qemu-aarch64-static)
missing=()
for entry in "${DEBIAN_TOOLS[@]}"; do
  command -v "${entry#*:}" >/dev/null 2>&1 || missing+=("${entry%%:*}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "setup: need root to install ${missing[*]}" >&2; exit 1; }
  echo "setup: installing ${missing[*]} from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v uv >/dev/null 2>&1; then
  echo "setup: installing uv ${UV_VERSION}"
  python3 -m pip install --quiet "uv==${UV_VERSION}"
fi
# The machine's Python 3.11; uv cannot download interpreters here.
uv sync --frozen --python 3.11 --quiet

# `crossplane` is the CLI (github.com/crossplane/cli/v2 v2.5.0); it renders
# through `crossplane-core` (github.com/crossplane/crossplane/v2 v2.3.4)
# given with --crossplane-binary; `helm` and `kubectl` test the agent's chart
# and kustomization. The modules in tools/ pin them with go.sum; the binaries
# go to the git-ignored .tools/bin.
mkdir -p .tools/bin
stamped() {  # stamped <binary name>: the version the binary says it is
  case $1 in
    helm) ".tools/bin/helm" version --template '{{.Version}}' ;;
    *) ".tools/bin/$1" --version ;;
  esac
}
build() {  # build <module dir> <package> <binary name> [<version variable>=<version>]
  local dir=$1 pkg=$2 out=$3 stamp=${4:-}
  local flags=()
  if [ -n "${stamp}" ]; then
    # A binary's version, stamped the way its release builds stamp it (`-X`): an
    # unstamped one says a placeholder, and what checks versions against it fails.
    flags=(-ldflags "-X ${stamp}")
    if [ -x ".tools/bin/${out}" ] && [ "$(stamped "${out}")" = "${stamp#*=}" ]; then return 0; fi
  elif [ -x ".tools/bin/${out}" ]; then
    return 0
  fi
  echo "setup: building ${out} from ${pkg} (a few minutes on a fresh machine)"
  (cd "${dir}" && go build -trimpath "${flags[@]}" -o "../../.tools/bin/${out}" "${pkg}")
}
build tools/crossplane-cli github.com/crossplane/cli/v2/cmd/crossplane crossplane &
cli=$!
# Crossplane core checks each package's `spec.crossplane.version` constraint against
# its own version: an unstamped core refuses every package that has a constraint.
build tools/crossplane-core github.com/crossplane/crossplane/v2/cmd/crossplane crossplane-core \
  github.com/crossplane/crossplane-runtime/v2/pkg/version.version=v2.3.4 &
core=$!
# The CEL parity oracle (tools/cel-oracle: Kubernetes' DRA CEL, k8s.io/dynamic-resource-allocation
# v0.35.4 as the e2e's control plane) that common/tests/cel/test_parity.py runs.
build tools/cel-oracle modelplane.ai/tools/cel-oracle cel-oracle &
oracle=$!
# Helm (helm.sh/helm/v3 v3.20.2) for the chart's tests: `helm lint`, `helm template`.
# Unstamped it says v3.20, and a chart's kubeVersion or Capabilities read that.
build tools/helm helm.sh/helm/v3/cmd/helm helm helm.sh/helm/v3/internal/version.version=v3.20.2 &
helm=$!
# kubectl (k8s.io/kubernetes v1.35.4, the module of the e2e's Kubernetes): the
# tests render deploy/agent with its built-in kustomize. make e2e-tools skips it.
build tools/kubernetes k8s.io/kubernetes/cmd/kubectl kubectl &
kubectl=$!
wait "${cli}"
wait "${core}"
wait "${oracle}"
wait "${helm}"
wait "${kubectl}"

# Third-party CRDs (provider-kubernetes, LeaderWorkerSet) for offline
# validation: copied out of the Go modules that tools/third-party-crds pins,
# so go.sum verifies them. Copied again whenever that go.sum changes.
crds() {
  local pins=tools/third-party-crds dest=.tools/crds
  if cmp -s "${pins}/go.sum" "${dest}/go.sum"; then return 0; fi
  echo "setup: copying third-party CRDs from the modules pinned in ${pins}"
  rm -rf "${dest}" && mkdir -p "${dest}"
  (cd "${pins}" && go mod download github.com/crossplane-contrib/provider-kubernetes sigs.k8s.io/lws)
  local provider lws
  provider=$(cd "${pins}" && go list -m -f '{{.Dir}}' github.com/crossplane-contrib/provider-kubernetes)
  lws=$(cd "${pins}" && go list -m -f '{{.Dir}}' sigs.k8s.io/lws)
  install -m 0644 "${provider}"/package/crds/kubernetes.m.crossplane.io_*.yaml "${dest}/"
  install -m 0644 "${lws}/config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml" "${dest}/"
  cp "${pins}/go.sum" "${dest}/go.sum"
}
crds
.tools/bin/crossplane version --client >/dev/null 2>&1 || true
echo "setup: ready ($(uv run --frozen python --version), crossplane, cel-oracle, helm and kubectl in .tools/bin, CRDs in .tools/crds)"
