#!/usr/bin/env bash
# Build the binaries the e2e suite runs (tests/e2e) into .tools/bin: Kubernetes
# v1.35.4 (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl:
# scripts/setup.sh builds it first, for the tests), etcd v3.6.16, Crossplane
# core v2.4.0 (the newest supported release; v2.3.4, the oldest, from setup.sh),
# provider-kubernetes v1.2.1 (modelplane_e2e.crossplane_versions), an OCI
# registry, kwok v0.8.0 (the workload cluster's kubelets), the LeaderWorkerSet
# controller v0.9.0 and syft v1.57.2 (the release's SBOMs: `make
# release-dry-run`, tests/e2e/test_release.py). Each comes from a pinned module
# in tools/ (go.sum committed). A binary already present is skipped; the floor
# Crossplane core (v2.3.4, `crossplane-core`) comes from scripts/setup.sh, which
# the render tests need anyway. openssl is installed with apt-get when missing.
#
# The newer minors of the supported-version matrix (design/agent.md, "Version
# matrix") each have a module, tools/kubernetes-<minor>, and a target of that
# name building its kube-apiserver, kube-controller-manager and kube-scheduler
# into .tools/kubernetes/<version>/bin: kubernetes-1.37 (v1.37.2, the newest,
# which CI runs) is built by default, kubernetes-1.36 (v1.36.3) only when named
# (`make agent-oracle-matrix`).
#
# Usage: scripts/e2e-tools.sh [kubernetes|kubernetes-1.36|kubernetes-1.37|etcd|crossplane-core|provider-kubernetes|registry|workloads|syft]...
# (no argument: all of them but kubernetes-1.36, one after another; a cold build
# takes ~15 min on two cores, and more with kubernetes-1.37 and the newest
# Crossplane core (design/agent.md and design/tooling.md give the figures), and
# grows the Go build cache by a few GB).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tools/bin
bin=$(cd .tools/bin && pwd)

# build [-X <variable>=<value>] <module dir> <binary>=<package>...: one `go
# build` for the binaries still missing, so packages shared between them
# compile once, into .tools/bin (or into ${into} when set). -X stamps a version
# the way the component's release build does.
build() {
  local ldflags=()
  if [ "$1" = -X ]; then ldflags=(-ldflags "-X $2"); shift 2; fi
  local dir=$1; shift
  local bin=${into:-${bin}}
  mkdir -p "${bin}"
  local pkgs=() missing=()
  for pair in "$@"; do
    local out=${pair%%=*} pkg=${pair#*=}
    if [ ! -x "${bin}/${out}" ]; then pkgs+=("${pkg}"); missing+=("${out}"); fi
  done
  if [ ${#pkgs[@]} -eq 0 ]; then return 0; fi
  echo "e2e-tools: building ${missing[*]} from tools/${dir} ($(date -u +%H:%M:%S))"
  local tmp
  tmp=$(mktemp -d "${bin}/.build.XXXXXX")
  # Static binaries; -o into a folder names each after its package's last element.
  (cd "tools/${dir}" && CGO_ENABLED=0 go build -trimpath "${ldflags[@]}" -o "${tmp}/" "${pkgs[@]}")
  for pair in "$@"; do
    local out=${pair%%=*} pkg=${pair#*=}
    local built=${pkg##*/}
    # A module path ending in a major version (…/server/v3) names the binary
    # after the element before it, as `go build` does.
    if [[ ${built} =~ ^v[0-9]+$ ]]; then built=${pkg%/*}; built=${built##*/}; fi
    if [ -x "${tmp}/${built}" ]; then mv "${tmp}/${built}" "${bin}/${out}"; fi
  done
  rmdir "${tmp}"
  echo "e2e-tools: built ${missing[*]} ($(date -u +%H:%M:%S))"
}

kubernetes() {
  build kubernetes \
    kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
    kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
    kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
    kubectl=k8s.io/kubernetes/cmd/kubectl
}
# The newer minors of the version matrix (design/agent.md): only what the agent's
# live tests and the kube-scheduler oracle run (etcd v3.6 and kubectl v1.35.4
# serve every minor), each into .tools/kubernetes/<version>/bin.
kubernetes_minor() {
  local minor=$1 version
  version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "tools/kubernetes-${minor}/go.mod")
  into="${PWD}/.tools/kubernetes/${version}/bin" build "kubernetes-${minor}" \
    kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
    kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
    kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
}
etcd() { build etcd etcd=go.etcd.io/etcd/server/v3; }
# The newest Crossplane core, stamped as its release is: the package manager
# checks each package's `spec.crossplane.version` against it.
crossplane-core() {
  build -X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=v2.4.0 \
    crossplane-core-v2.4 crossplane-core-v2.4.0=github.com/crossplane/crossplane/v2/cmd/crossplane
}
# The floor, which is also the newest release that builds from the Go module proxy
# (modelplane_e2e.crossplane_versions says why).
provider-kubernetes() {
  build provider-kubernetes provider-kubernetes=github.com/crossplane-contrib/provider-kubernetes/cmd/provider
}
registry() { build registry registry=github.com/google/go-containerregistry/cmd/registry; }
# kwok and LWS share one module (and one go build), so the Kubernetes
# libraries both use compile once. LWS's manager is its module's cmd package:
# -o names it `cmd`, renamed here.
workloads() { build workloads kwok=sigs.k8s.io/kwok/cmd/kwok lws=sigs.k8s.io/lws/cmd; }
syft() { build syft syft=github.com/anchore/syft/cmd/syft; }

# The suite makes its certificates with openssl.
if ! command -v openssl >/dev/null 2>&1; then
  echo "e2e-tools: installing openssl"
  apt-get install -y -q openssl >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q openssl >/dev/null; }
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(kubernetes kubernetes-1.37 etcd crossplane-core provider-kubernetes registry workloads syft)
fi
for target in "${targets[@]}"; do
  case "${target}" in
    kubernetes | etcd | crossplane-core | provider-kubernetes | registry | workloads | syft) "${target}" ;;
    kubernetes-1.36 | kubernetes-1.37) kubernetes_minor "${target#kubernetes-}" ;;
    *) echo "e2e-tools: unknown target ${target}" >&2; exit 2 ;;
  esac
done
