#!/usr/bin/env bash
# Build the three Function packages (.xpkg), the Configuration package that
# depends on them and the agent's image from uv.lock, without Docker.
#
#   dist/xpkg/<function>.xpkg     the Function package: runtime image + package layer
#   dist/xpkg/modelplane-fleet.xpkg
#                                 the Configuration package: apis/ (crossplane.yaml,
#                                 the XRDs and Compositions), one package layer
#   dist/images/<function>.tar    the runtime image alone (docker-archive, tag
#                                 modelplane/<function>:v<version>)
#   dist/images/modelplane-agent.tar
#                                 the agent's image (docker-archive, tag
#                                 modelplane/agent:v<version>); a plain image,
#                                 deploy/agent/deployment.yaml runs it
#   dist/oci/                     the same images as one OCI layout
#   dist/debian-packages.txt      the Debian packages of the base, name=version
#   dist/build-info.txt           version, commit and SOURCE_DATE_EPOCH of the build
#   dist/SHA256SUMS               sha256 of every file above
#   dist/build/                   the work: base/ (the Debian rootfs), <package>/venv
#
# Every image has two layers: a Debian bookworm base shared by all four
# (python3.11 and the libraries grpcio needs, nothing else: no shell) and one
# layer holding the package's virtual environment at /venv, installed by uv
# from uv.lock inside that very base so the wheels match its Python and libc.
# The same steps build every image; a function's image then becomes a package.
# Given the same Debian packages and the same commit, the bytes are the same:
# every timestamp is the last commit's time (SOURCE_DATE_EPOCH), tar orders
# names and drops owners, and bytecode carries source hashes, not times.
# The Debian archive moves, so the package versions are printed and kept.
#
# Needs root (mmdebstrap --mode=root), mmdebstrap, bubblewrap, umoci, skopeo
# (all installed by `make setup`), the Crossplane CLI in .tools/bin, uv and
# network access to the Debian mirror and PyPI. Idempotent: it starts from
# an empty dist/build every time and replaces the outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

FUNCTIONS=(compose-inference-cluster compose-model-replica compose-model-deployment)
CONFIGURATION=modelplane-fleet
SUITE=bookworm
BASE_PACKAGES=python3.11-minimal,libpython3.11-stdlib,libstdc++6
# The runtime user: nobody. Numeric, so Kubernetes can check runAsNonRoot.
RUNTIME_UID=65534
# The functions serve RunFunction on 9443 (modelplane_common.server); the
# agent serves /healthz, /readyz and /metrics on the port of its --listen
# default (agent/src/modelplane_agent/main.py).
FUNCTION_PORT=9443
AGENT=modelplane-agent
AGENT_PORT=8080

# PACKAGES_DIST builds elsewhere (the reproducibility test builds twice).
DIST=${PACKAGES_DIST:-$ROOT/dist}
WORK=$DIST/build
CROSSPLANE=${CROSSPLANE:-$ROOT/.tools/bin/crossplane}

step() { printf '%s packages: %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { printf 'packages: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root: mmdebstrap --mode=root and bubblewrap's mounts need it"
for tool in mmdebstrap bwrap umoci skopeo tar git; do
  command -v "$tool" >/dev/null || die "$tool is missing: run \`make setup\`"
done
[ -x "$CROSSPLANE" ] || die "$CROSSPLANE is missing: run \`make setup\`"

# One version for everything: the workspace's, in pyproject.toml
# (modelplane_devtools.version, which also checks every copy of it).
VERSION=$(uv run --frozen --no-sync python -m modelplane_devtools.version)
TAG=v$VERSION
# The SPDX expression of LICENSE, as every pyproject.toml and package declares it.
LICENSE=Apache-2.0
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)
export SOURCE_DATE_EPOCH
CREATED=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
REVISION=$(git rev-parse HEAD)

# The real uv binary: a pyenv or pip shim on PATH is a script that cannot
# run inside the sandbox, which holds only the Debian base.
is_elf() { [ -n "$1" ] && [ -f "$1" ] && [ "$(head -c 4 "$1" | tail -c 3)" = ELF ]; }
for candidate in "${UV_BIN:-}" "$(command -v uv)" \
  "$(python3 -c 'import uv; print(uv.find_uv_bin())' 2>/dev/null || true)"; do
  if is_elf "$candidate"; then UV_BIN=$candidate; break; fi
done
is_elf "${UV_BIN:-}" || die "no uv executable found (set UV_BIN to the binary, not a shim)"
UV_CACHE=$(uv cache dir)
mkdir -p "$UV_CACHE"
# What reaches PyPI from this machine reaches it from the sandbox too: a
# custom CA bundle (a proxy's, for instance), proxies and index settings.
CA_FILE=${UV_CERT_FILE:-${SSL_CERT_FILE:-${REQUESTS_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}}}
[ -f "$CA_FILE" ] || die "CA bundle $CA_FILE is missing (set SSL_CERT_FILE)"
PASS_ENV=()
for name in HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy https_proxy no_proxy ALL_PROXY \
  UV_INDEX UV_INDEX_URL UV_DEFAULT_INDEX UV_EXTRA_INDEX_URL UV_NATIVE_TLS UV_INSECURE_HOST; do
  if [ -n "${!name:-}" ]; then PASS_ENV+=(--setenv "$name" "${!name}"); fi
done

step "version $TAG, commit ${REVISION:0:12}, SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH ($CREATED)"
rm -rf "$WORK" "$DIST/xpkg" "$DIST/images" "$DIST/oci"
mkdir -p "$WORK" "$DIST/xpkg" "$DIST/images"

# Deterministic tar: sorted names, fixed times and owners, no atime/ctime or
# process ids in pax headers.
det_tar() {  # det_tar <output> <directory> <member>... [tar options]
  local out=$1 dir=$2
  shift 2
  tar --create --file="$out" --directory="$dir" \
    --sort=name --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    "$@"
}

# ---- 1. the Debian base -----------------------------------------------------
BASE=$WORK/base
step "debian base: mmdebstrap $SUITE with $BASE_PACKAGES"
mmdebstrap --mode=root --variant=extract --include="$BASE_PACKAGES" \
  --skip=cleanup/apt/cache --quiet "$SUITE" "$BASE"
for deb in "$BASE"/var/cache/apt/archives/*.deb; do
  dpkg-deb --show --showformat='${Package}=${Version}\n' "$deb"
done | sort >"$DIST/debian-packages.txt"
step "debian base: $(wc -l <"$DIST/debian-packages.txt") packages (dist/debian-packages.txt):"
sed 's/^/    /' "$DIST/debian-packages.txt"

# What the runtime does not need, and what mmdebstrap copies from this host.
rm -rf "$BASE"/var/cache/apt/* "$BASE"/var/lib/apt/lists/* "$BASE"/var/log/* \
  "$BASE"/usr/share/{doc,man,info,locale,lintian,bug,gdb} "$BASE"/etc/hostname
find "$BASE/dev" -mindepth 1 -delete
: >"$BASE/etc/resolv.conf"
: >"$BASE/etc/hosts"
printf '%s\n' 'root:x:0:0:root:/root:/usr/sbin/nologin' \
  "nobody:x:$RUNTIME_UID:$RUNTIME_UID:nobody:/nonexistent:/usr/sbin/nologin" >"$BASE/etc/passwd"
printf '%s\n' 'root:x:0:' "nogroup:x:$RUNTIME_UID:" >"$BASE/etc/group"
# Mount points: /proc and /sys for any runtime, /venv for the function layer.
mkdir -p "$BASE/proc" "$BASE/sys" "$BASE/venv"

step "debian base: precompiling the standard library"
# unchecked-hash: the layer's times are the commit's, so timestamp-checked
# bytecode would look stale and be recompiled on every start.
bwrap --bind "$BASE" / --dev /dev --proc /proc --tmpfs /tmp --clearenv \
  --setenv PATH /usr/bin --setenv SOURCE_DATE_EPOCH "$SOURCE_DATE_EPOCH" \
  /usr/bin/python3.11 -m compileall -q -j0 --invalidation-mode unchecked-hash \
  /usr/lib/python3.11 >/dev/null

det_tar "$WORK/base.tar" "$BASE" .
step "debian base: layer $(du -h "$WORK/base.tar" | cut -f1)"

# ---- 2. one virtual environment per image ------------------------------------
# uv builds the workspace's own packages from a copy of the files git sees
# (tracked, and untracked but not ignored, as they are in the working tree),
# so nothing ignored (.venv, dist, caches) can reach a package, all of them
# dated SOURCE_DATE_EPOCH.
SRC=$WORK/src
mkdir -p "$SRC"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' path; do [ -e "$path" ] && printf '%s\0' "$path"; done |
  tar --create --null --files-from=- --file=- | tar --extract --file=- --directory="$SRC"
find "$SRC" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +

venv() {  # venv <package>: /venv of a workspace package, installed by uv in the base
  # Two statements: in `local fn=$1 out=$WORK/$fn` the $fn would be the caller's.
  local fn=$1
  local out=$WORK/$fn
  mkdir -p "$out/venv"
  # The base is read-only; the source copy is read-only at /tmp/src; only the
  # output (at /venv, where the image has it) and uv's cache are writable.
  bwrap --ro-bind "$BASE" / --dev /dev --proc /proc --tmpfs /tmp \
    --ro-bind /etc/resolv.conf /etc/resolv.conf \
    --ro-bind "$CA_FILE" /tmp/ca.crt \
    --ro-bind "$UV_BIN" /tmp/uv \
    --ro-bind "$SRC" /tmp/src \
    --bind "$UV_CACHE" /tmp/uv-cache \
    --bind "$out/venv" /venv \
    --chdir /tmp/src --clearenv \
    --setenv PATH /usr/bin --setenv HOME /tmp \
    --setenv SSL_CERT_FILE /tmp/ca.crt \
    --setenv SOURCE_DATE_EPOCH "$SOURCE_DATE_EPOCH" \
    --setenv UV_CACHE_DIR /tmp/uv-cache \
    --setenv UV_PROJECT_ENVIRONMENT /venv \
    --setenv UV_PYTHON /usr/bin/python3.11 \
    --setenv UV_PYTHON_DOWNLOADS never \
    --setenv UV_NO_PROGRESS 1 \
    "${PASS_ENV[@]}" \
    /tmp/uv sync --frozen --no-dev --no-editable --package "$fn" --compile-bytecode --quiet
  # uv's marker for backup tools, not part of the environment; and uv's note,
  # in each workspace package it built, of when it built it (for a later
  # `uv sync`, which never runs on an image), with its line in RECORD.
  rm -f "$out/venv/CACHEDIR.TAG"
  local note
  while IFS= read -r -d '' note; do
    rm "$note"
    sed -i '/\.dist-info\/uv_cache\.json,/d' "$(dirname "$note")/RECORD"
  done < <(find "$out/venv/lib" -path '*.dist-info/uv_cache.json' -print0)
  det_tar "$out/venv.tar" "$out" venv
  step "$fn: venv layer $(du -h "$out/venv.tar" | cut -f1)"
}

# ---- 3. the runtime image ------------------------------------------------------
OCI=$DIST/oci
umoci init --layout "$OCI"
# The base layer is compressed once, under the tag `base`, and each image
# starts from it.
umoci new --image "$OCI:base"
umoci raw add-layer --image "$OCI:base" --history.created="$CREATED" \
  --history.created_by="mmdebstrap $SUITE $BASE_PACKAGES" "$WORK/base.tar"
image() {  # image <package> <repository> <port>: base + venv layers, entrypoint and user
  # The entrypoint is the package's command of the same name; the tarball is
  # dist/images/<package>.tar, tagged modelplane/<repository>:v<version>.
  local fn=$1 repository=$2 port=$3 ref=$OCI:$1
  umoci raw add-layer --image "$OCI:base" --tag "$fn" --history.created="$CREATED" \
    --history.created_by="uv sync --frozen --no-dev --no-editable --package $fn" \
    "$WORK/$fn/venv.tar"
  umoci config --image "$ref" --created="$CREATED" --history.created="$CREATED" \
    --history.created_by="entrypoint /venv/bin/$fn, user $RUNTIME_UID, port $port" \
    --config.entrypoint="/venv/bin/$fn" \
    --config.user="$RUNTIME_UID:$RUNTIME_UID" \
    --config.exposedports="$port/tcp" \
    --config.workingdir=/ \
    --config.env=PATH=/venv/bin:/usr/bin \
    --config.label=org.opencontainers.image.title="$fn" \
    --config.label=org.opencontainers.image.version="$VERSION" \
    --config.label=org.opencontainers.image.licenses="$LICENSE" \
    --config.label=org.opencontainers.image.revision="$REVISION" \
    --config.label=org.opencontainers.image.created="$CREATED"
  skopeo copy --quiet "oci:$OCI:$fn" "docker-archive:$DIST/images/$fn.tar:modelplane/$repository:$TAG"
  step "$fn: image dist/images/$fn.tar (modelplane/$repository:$TAG) $(du -h "$DIST/images/$fn.tar" | cut -f1)"
}

# ---- 4. the Function package -------------------------------------------------
package() {  # package <function>: crossplane.yaml on top of the runtime image
  local fn=$1
  # --examples-root must not exist: the default ./examples is this
  # repository's example fleet, which is no package content.
  "$CROSSPLANE" xpkg build \
    --package-root="functions/$fn/package" \
    --examples-root="$WORK/no-examples" \
    --embed-runtime-image-tarball="$DIST/images/$fn.tar" \
    --package-file="$DIST/xpkg/$fn.xpkg"
  step "$fn: package dist/xpkg/$fn.xpkg $(du -h "$DIST/xpkg/$fn.xpkg" | cut -f1)"
}

for fn in "${FUNCTIONS[@]}"; do
  step "$fn: uv sync into /venv"
  venv "$fn"
  image "$fn" "$fn" "$FUNCTION_PORT"
  package "$fn"
done
# ---- 5. the Configuration package ---------------------------------------------
# apis/crossplane.yaml and every XRD and Composition under apis/, no runtime:
# `crossplane xpkg build` alone, offline (design/tooling.md says why not
# `crossplane project build`). Its dependencies are references, resolved by
# the package manager at install time.
step "$CONFIGURATION: package dist/xpkg/$CONFIGURATION.xpkg"
"$CROSSPLANE" xpkg build \
  --package-root=apis \
  --examples-root="$WORK/no-examples" \
  --package-file="$DIST/xpkg/$CONFIGURATION.xpkg"
step "$CONFIGURATION: package dist/xpkg/$CONFIGURATION.xpkg $(du -h "$DIST/xpkg/$CONFIGURATION.xpkg" | cut -f1)"

step "$AGENT: uv sync into /venv"
venv "$AGENT"
image "$AGENT" agent "$AGENT_PORT"

printf 'version=%s\ncommit=%s\nsource_date_epoch=%s\n' "$VERSION" "$REVISION" "$SOURCE_DATE_EPOCH" \
  >"$DIST/build-info.txt"
# The base tag was a step, not an image; its blobs stay, shared by the four.
umoci rm --image "$OCI:base"
(cd "$DIST" && sha256sum build-info.txt debian-packages.txt images/*.tar xpkg/*.xpkg >SHA256SUMS)
step "done:"
sed 's/^/    /' "$DIST/SHA256SUMS"
