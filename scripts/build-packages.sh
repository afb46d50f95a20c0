#!/usr/bin/env bash
# Build the three Function packages (.xpkg), the Configuration package that
# depends on them and the agent's image from uv.lock, without Docker, for
# linux/amd64 and linux/arm64 (the Configuration has no runtime: one package).
#
#   dist/xpkg/<function>.xpkg     the Function package: runtime image + package layer
#   dist/xpkg/<function>-arm64.xpkg
#                                 the same for arm64 (`crossplane xpkg push -f
#                                 <function>.xpkg,<function>-arm64.xpkg` pushes
#                                 both under one tag, as an OCI image index)
#   dist/xpkg/modelplane-fleet.xpkg
#                                 the Configuration package: apis/ (crossplane.yaml,
#                                 the XRDs and Compositions), one package layer
#   dist/images/<function>[-arm64].tar
#                                 the runtime image alone (docker-archive, tag
#                                 <registry>/<function>:v<version>, its package's)
#   dist/images/modelplane-agent[-arm64].tar
#                                 the agent's image (docker-archive, tag
#                                 <registry>/modelplane-agent:v<version>); a plain image,
#                                 deploy/agent/deployment.yaml runs it
#   dist/oci/                     the same images as one OCI layout, tagged
#                                 <image>-amd64 and <image>-arm64, and <image>:
#                                 an image index of the two (skopeo copy --all)
#   dist/debian-packages[-arm64].txt
#                                 the Debian packages of the base, name=version
#   dist/debian/<arch>/*.deb      those packages: PACKAGES_DEBIAN=<that dist>/debian
#                                 builds the bases from them alone, no mirror
#   dist/build-info.txt           version, commit and SOURCE_DATE_EPOCH of the build
#   dist/SHA256SUMS               sha256 of every file above (of dist/oci: its index.json)
#                                 but the .debs
#   dist/build/                   the work: <arch>/base (the Debian rootfs), <arch>/<package>/venv
#
# Every image has two layers: a Debian bookworm base of its architecture,
# shared by its four images (python3.11 and the libraries grpcio needs,
# nothing else: no shell), and one layer holding the package's virtual
# environment at /venv, installed by uv from uv.lock. uv always runs inside
# the amd64 base, with the build machine's own architecture (so no emulator
# builds anything): for amd64 the wheels match that base's Python and libc
# as found; for arm64 `--python-platform aarch64-manylinux_2_36` (bookworm's
# glibc) picks the aarch64 wheels uv.lock records. Bytecode does not depend
# on the architecture, only on the Python version, which the script checks is
# the same in both bases; the package tests import every arm64 image under
# qemu-user. The same steps build every image; a function's image then
# becomes a package. Given the same Debian packages and the same commit, the
# bytes are the same: every timestamp is the last commit's time
# (SOURCE_DATE_EPOCH), tar orders names and drops owners, and bytecode
# carries source hashes, not times. The Debian archive moves, so the package
# versions are printed and kept, and so are the .debs.
#
# Needs root (mmdebstrap --mode=root), mmdebstrap, bubblewrap, umoci, skopeo
# (all installed by `make setup`), the Crossplane CLI in .tools/bin, uv and
# network access to the Debian mirror (unless PACKAGES_DEBIAN is set) and
# PyPI. Idempotent: it starts from an empty dist/build every time and
# replaces the outputs, unless dist/ already is this clean tree's build.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

FUNCTIONS=(compose-inference-cluster compose-model-replica compose-model-deployment)
CONFIGURATION=modelplane-fleet
SUITE=bookworm
BASE_PACKAGES=python3.11-minimal,libpython3.11-stdlib,libstdc++6
# Debian's names. amd64 is the build machine's: its base runs uv and the
# bytecode compiler for both, and its images keep the unsuffixed names.
ARCHES=(amd64 arm64)
# The runtime user: nobody. Numeric, so Kubernetes can check runAsNonRoot.
RUNTIME_UID=65534
# The functions serve RunFunction on 9443 (modelplane_common.server); the
# agent serves /healthz, /readyz and /metrics on the port of its --listen
# default (agent/src/modelplane_agent/main.py).
FUNCTION_PORT=9443
AGENT=modelplane-agent
AGENT_PORT=8080

# PACKAGES_DIST builds elsewhere (the reproducibility test builds twice);
# PACKAGES_DEBIAN is an earlier build's dist/debian, to build the bases from
# exactly its .debs (the second build of that test, so a moving mirror
# cannot make the two differ).
DIST=${PACKAGES_DIST:-$ROOT/dist}
DEBIAN_FROM=${PACKAGES_DEBIAN:-}
WORK=$DIST/build
CROSSPLANE=${CROSSPLANE:-$ROOT/.tools/bin/crossplane}

step() { printf '%s packages: %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { printf 'packages: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root: mmdebstrap --mode=root and bubblewrap's mounts need it"
for tool in mmdebstrap bwrap umoci skopeo tar git dpkg-deb; do
  command -v "$tool" >/dev/null || die "$tool is missing: run \`make setup\`"
done
[ -x "$CROSSPLANE" ] || die "$CROSSPLANE is missing: run \`make setup\`"

# One version for everything: the workspace's, in pyproject.toml
# (modelplane_devtools.version, which also checks every copy of it).
VERSION=$(uv run --frozen --no-sync python -m modelplane_devtools.version)
TAG=v$VERSION
# One registry for every artifact (modelplane_devtools.artifacts): each image is
# tagged <registry>/<its name>, the name the release publishes it under.
REGISTRY=$(uv run --frozen --no-sync python -m modelplane_devtools.artifacts)
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
# A clean tree (no change, no untracked file) whose commit dist/ was built
# from, with every output still matching its sum, builds the same bytes
# again: `make e2e` after `make test` (CI) skips a third build of both
# architectures. PACKAGES_REBUILD=1 builds anyway.
built_from_this_tree() {
  [ -z "${PACKAGES_REBUILD:-}" ] && [ -z "$(git status --porcelain)" ] &&
    grep -qx "commit=$REVISION" "$DIST/build-info.txt" 2>/dev/null &&
    (cd "$DIST" && sha256sum --quiet --check SHA256SUMS >/dev/null 2>&1)
}
if built_from_this_tree; then
  step "dist/ is this commit's build and the tree is clean: nothing to do (PACKAGES_REBUILD=1 to build)"
  exit 0
fi
if [ -n "$DEBIAN_FROM" ]; then
  DEBIAN_FROM=$(realpath "$DEBIAN_FROM")
  case $DEBIAN_FROM/ in "$(realpath -m "$DIST")"/*) die "PACKAGES_DEBIAN=$DEBIAN_FROM is inside the dist this build replaces" ;; esac
  for arch in "${ARCHES[@]}"; do
    compgen -G "$DEBIAN_FROM/$arch/*.deb" >/dev/null || die "PACKAGES_DEBIAN=$DEBIAN_FROM has no $arch/*.deb"
  done
fi
rm -rf "$WORK" "$DIST/xpkg" "$DIST/images" "$DIST/oci" "$DIST/debian"
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

# The name of an architecture's outputs: amd64's are the unsuffixed ones.
suffix() { [ "$1" = amd64 ] || printf -- '-%s' "$1"; }

# ---- 1. the Debian bases ----------------------------------------------------
# A flat APT repository of an earlier build's .debs for one architecture:
# with it as the only mirror, apt can resolve to nothing but that set.
local_mirror() {  # local_mirror <arch>: prints the sources.list line
  local repo=$WORK/$1/mirror deb
  mkdir -p "$repo"
  cp "$DEBIAN_FROM/$1"/*.deb "$repo"/
  for deb in "$repo"/*.deb; do
    dpkg-deb --field "$deb"
    printf 'Filename: ./%s\nSize: %s\nSHA256: %s\n\n' "$(basename "$deb")" \
      "$(stat -c %s "$deb")" "$(sha256sum "$deb" | cut -d' ' -f1)"
  done >"$repo/Packages"
  # copy:// (not file://) so apt puts the .debs in the archive cache, as from a mirror.
  printf 'deb [trusted=yes] copy://%s ./' "$repo"
}

base() {  # base <arch>: $WORK/<arch>/base, its .debs in dist/debian/<arch> and its list
  local arch=$1
  local root=$WORK/$arch/base list=$DIST/debian-packages$(suffix "$arch").txt
  local mirror=()
  mkdir -p "$WORK/$arch"
  if [ -n "$DEBIAN_FROM" ]; then mirror=("$(local_mirror "$arch")"); fi
  step "debian base $arch: mmdebstrap $SUITE with $BASE_PACKAGES${DEBIAN_FROM:+ from $DEBIAN_FROM/$arch}"
  mmdebstrap --mode=root --variant=extract --architectures="$arch" --include="$BASE_PACKAGES" \
    --skip=cleanup/apt/cache --quiet "$SUITE" "$root" "${mirror[@]}"
  mkdir -p "$DIST/debian/$arch"
  cp "$root"/var/cache/apt/archives/*.deb "$DIST/debian/$arch"/
  for deb in "$DIST/debian/$arch"/*.deb; do
    dpkg-deb --show --showformat='${Package}=${Version}\n' "$deb"
  done | sort >"$list"
  step "debian base $arch: $(wc -l <"$list") packages (dist/$(basename "$list"))"

  # What the runtime does not need, and what mmdebstrap copies from this host.
  # APT's configuration and state are mmdebstrap's own (the image has no apt),
  # and sources.list names the mirror this build used, local or not.
  rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt "$root"/etc/apt "$root"/var/log/* \
    "$root"/usr/share/{doc,man,info,locale,lintian,bug,gdb} "$root"/etc/hostname
  find "$root/dev" -mindepth 1 -delete
  : >"$root/etc/resolv.conf"
  : >"$root/etc/hosts"
  printf '%s\n' 'root:x:0:0:root:/root:/usr/sbin/nologin' \
    "nobody:x:$RUNTIME_UID:$RUNTIME_UID:nobody:/nonexistent:/usr/sbin/nologin" >"$root/etc/passwd"
  printf '%s\n' 'root:x:0:' "nogroup:x:$RUNTIME_UID:" >"$root/etc/group"
  # Mount points: /proc and /sys for any runtime, /venv for the function layer.
  mkdir -p "$root/proc" "$root/sys" "$root/venv"
}

# The standard library's bytecode, compiled by the amd64 base's python3.11
# from the sources of the base at hand, bound at /tmp/stdlib: -d records
# the file names as /usr/lib/python3.11/..., as compiling in place would.
# unchecked-hash: the layer's times are the commit's, so timestamp-checked
# bytecode would look stale and be recompiled on every start.
compile_stdlib() {  # compile_stdlib <arch>
  local root=$WORK/$1/base
  step "debian base $1: precompiling the standard library"
  bwrap --ro-bind "$WORK/amd64/base" / --dev /dev --proc /proc --tmpfs /tmp --clearenv \
    --bind "$root/usr/lib/python3.11" /tmp/stdlib \
    --setenv PATH /usr/bin --setenv SOURCE_DATE_EPOCH "$SOURCE_DATE_EPOCH" \
    /usr/bin/python3.11 -m compileall -q -j0 --invalidation-mode unchecked-hash \
    -d /usr/lib/python3.11 /tmp/stdlib >/dev/null
  det_tar "$WORK/$1/base.tar" "$root" .
  step "debian base $1: layer $(du -h "$WORK/$1/base.tar" | cut -f1)"
}

python_version() {  # python_version <debian-packages file>
  sed -n 's/^python3\.11-minimal=//p' "$1"
}

# The bases are independent and mostly wait on the mirror: built side by side.
waitall() {  # waitall <pid>...: wait for each, fail if any failed
  local pid failed=0
  for pid in "$@"; do wait "$pid" || failed=1; done
  [ "$failed" = 0 ] || die "a step running alongside failed (its output is above)"
}
pids=()
for arch in "${ARCHES[@]}"; do
  base "$arch" &
  pids+=($!)
done
waitall "${pids[@]}"

for arch in "${ARCHES[@]}"; do
  step "debian base $arch: dist/debian-packages$(suffix "$arch").txt:"
  sed 's/^/    /' "$DIST/debian-packages$(suffix "$arch").txt"
done
# The venvs record the amd64 interpreter's version (pyvenv.cfg), and bytecode
# is only the same for the same Python: every base must have the same one.
for arch in "${ARCHES[@]}"; do
  [ "$(python_version "$DIST/debian-packages$(suffix "$arch").txt")" = "$(python_version "$DIST/debian-packages.txt")" ] ||
    die "python3.11-minimal differs between amd64 and $arch: the mirror is mid-update; build again later"
done
for arch in "${ARCHES[@]}"; do compile_stdlib "$arch"; done

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

# uv's target for an architecture's wheels; none for amd64, the interpreter's own.
python_platform() {  # python_platform <arch>
  case $1 in
    amd64) ;;
    arm64) printf '%s\n' --python-platform aarch64-manylinux_2_36 ;;
    *) die "no Python platform for $1" ;;
  esac
}

venv() {  # venv <package> <arch>: /venv of a workspace package, installed by uv in the amd64 base
  # Two statements: in `local fn=$1 out=$WORK/$fn` the $fn would be the caller's.
  local fn=$1 arch=$2
  local out=$WORK/$arch/$fn platform
  mapfile -t platform < <(python_platform "$arch")
  mkdir -p "$out/venv"
  # The base is read-only; the source copy is read-only at /tmp/src; only the
  # output (at /venv, where the image has it) and uv's cache are writable.
  bwrap --ro-bind "$WORK/amd64/base" / --dev /dev --proc /proc --tmpfs /tmp \
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
    /tmp/uv sync --frozen --no-dev --no-editable --package "$fn" "${platform[@]}" \
    --compile-bytecode --quiet
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
  step "$fn $arch: venv layer $(du -h "$out/venv.tar" | cut -f1)"
}

# ---- 3. the runtime image ------------------------------------------------------
OCI=$DIST/oci
umoci init --layout "$OCI"
# Each base layer is compressed once, under the tag `base-<arch>`, and each
# image of that architecture starts from it.
for arch in "${ARCHES[@]}"; do
  umoci new --image "$OCI:base-$arch"
  umoci raw add-layer --image "$OCI:base-$arch" --history.created="$CREATED" \
    --history.created_by="mmdebstrap --architectures=$arch $SUITE $BASE_PACKAGES" "$WORK/$arch/base.tar"
done
image() {  # image <package> <arch> <port>: base + venv layers, entrypoint and user
  # The entrypoint is the package's command of the same name; the tarball is
  # dist/images/<package>[-<arch>].tar, tagged <registry>/<package>:v<version>
  # (one tag for every architecture, as a registry's index has it).
  local fn=$1 arch=$2 port=$3
  local name=$fn$(suffix "$arch")
  local ref=$OCI:$fn-$arch platform
  platform=$(python_platform "$arch" | paste -sd' ')
  umoci raw add-layer --image "$OCI:base-$arch" --tag "$fn-$arch" --history.created="$CREATED" \
    --history.created_by="uv sync --frozen --no-dev --no-editable --package $fn${platform:+ $platform}" \
    "$WORK/$arch/$fn/venv.tar"
  umoci config --image "$ref" --created="$CREATED" --history.created="$CREATED" \
    --history.created_by="entrypoint /venv/bin/$fn, user $RUNTIME_UID, port $port" \
    --os=linux --architecture="$arch" \
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
  skopeo copy --quiet "oci:$ref" "docker-archive:$DIST/images/$name.tar:$REGISTRY/$fn:$TAG"
  step "$fn $arch: image dist/images/$name.tar ($REGISTRY/$fn:$TAG) $(du -h "$DIST/images/$name.tar" | cut -f1)"
}

# ---- 4. the Function package -------------------------------------------------
package() {  # package <function> <arch>: crossplane.yaml on top of the runtime image
  local fn=$1 arch=$2
  local name=$fn$(suffix "$arch")
  # --examples-root must not exist: the default ./examples is this
  # repository's example fleet, which is no package content.
  "$CROSSPLANE" xpkg build \
    --package-root="functions/$fn/package" \
    --examples-root="$WORK/no-examples" \
    --embed-runtime-image-tarball="$DIST/images/$name.tar" \
    --package-file="$DIST/xpkg/$name.xpkg"
  step "$fn $arch: package dist/xpkg/$name.xpkg $(du -h "$DIST/xpkg/$name.xpkg" | cut -f1)"
}

# `crossplane xpkg build` reads only its image's archive and recompresses
# every layer: it runs alongside the next image's steps (umoci, which shares
# the one OCI layout, runs one at a time).
pids=()
for arch in "${ARCHES[@]}"; do
  for fn in "${FUNCTIONS[@]}"; do
    step "$fn $arch: uv sync into /venv"
    venv "$fn" "$arch"
    image "$fn" "$arch" "$FUNCTION_PORT"
    package "$fn" "$arch" &
    pids+=($!)
  done
  step "$AGENT $arch: uv sync into /venv"
  venv "$AGENT" "$arch"
  image "$AGENT" "$arch" "$AGENT_PORT"
done
waitall "${pids[@]}"

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

printf 'version=%s\ncommit=%s\nsource_date_epoch=%s\n' "$VERSION" "$REVISION" "$SOURCE_DATE_EPOCH" \
  >"$DIST/build-info.txt"
# The base tags were a step, not images; their blobs stay, shared by the images.
for arch in "${ARCHES[@]}"; do umoci rm --image "$OCI:base-$arch"; done
# One image index per image, over its architectures, tagged with its name.
uv run --frozen --no-sync python -m modelplane_devtools.oci_index "$OCI" \
  "${ARCHES[@]/#/--arch=}" "${FUNCTIONS[@]}" "$AGENT"
# index.json names every manifest by digest, so its sum covers the whole layout.
(cd "$DIST" && sha256sum build-info.txt debian-packages*.txt images/*.tar xpkg/*.xpkg oci/index.json >SHA256SUMS)
step "done:"
sed 's/^/    /' "$DIST/SHA256SUMS"
