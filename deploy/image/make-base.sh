#!/usr/bin/env bash
# Builds the two base images the Containerfile takes as build arguments, from Debian
# packages and this machine's Node.js, for hosts where no image registry is reachable
# (the test suite, air-gapped build machines):
#
#   deploy/image/make-base.sh            # prints NODE_IMAGE=… and BUILD_IMAGE=… lines
#
#   localhost/orloj-base/node:20        debootstrap --variant=minbase bookworm + node
#                                         (stands in for node:20-bookworm-slim)
#   localhost/orloj-base/node-build:20  the same + python3, make, g++ and Node's headers
#                                         (stands in for node:20-bookworm: native addons)
#
# Node comes from the host (`command -v node`, its npm next to it, its headers under
# <prefix>/include/node), so the images carry the exact runtime the tests use. The
# debootstrap root is cached in ${ORLOJ_IMAGE_BASE_DIR:-/var/tmp/orloj-image-base}
# (outside the repository); an image already present is not rebuilt. Needs root,
# podman and debootstrap (installed with apt-get when missing). Logs go to stderr.
set -euo pipefail

CACHE=${ORLOJ_IMAGE_BASE_DIR:-/var/tmp/orloj-image-base}
SUITE=${ORLOJ_IMAGE_BASE_SUITE:-bookworm}
MIRROR=${ORLOJ_IMAGE_BASE_MIRROR:-http://deb.debian.org/debian}
NODE_IMAGE=localhost/orloj-base/node:20
BUILD_IMAGE=localhost/orloj-base/node-build:20

log() { echo "[make-base] $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, podman import)"
for tool in podman debootstrap; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    log "installing $tool"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$tool" >/dev/null 2>&1 \
      || die "apt-get install $tool failed"
  fi
done

present() { podman image exists "$1" 2>/dev/null; }

mkdir -p "$CACHE"
exec 9>"$CACHE/lock"
flock -w 900 9 || die "could not lock $CACHE/lock"

node_bin=$(readlink -f "$(command -v node)") || die "no node on this machine"
prefix=$(dirname "$(dirname "$node_bin")")
node_version=$("$node_bin" --version)
case "$node_version" in v20.*|v22.*) ;; *) die "node $node_version: orloj needs Node.js 20.19 or newer" ;; esac

# A root with Debian's minimal base, the host's node/npm, and a non-root user.
make_root() {
  local root=$1
  shift
  rm -rf "$root.tmp"
  log "debootstrap $SUITE into $root (once; cached in $CACHE)"
  debootstrap --variant=minbase --include="ca-certificates${1:+,$1}" "$SUITE" "$root.tmp" "$MIRROR" >&2 \
    || die "debootstrap failed"
  mkdir -p "$root.tmp/usr/local/bin" "$root.tmp/usr/local/lib/node_modules" "$root.tmp/usr/local/include"
  cp -a "$node_bin" "$root.tmp/usr/local/bin/node"
  cp -a "$prefix/lib/node_modules/npm" "$root.tmp/usr/local/lib/node_modules/npm"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root.tmp/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root.tmp/usr/local/bin/npx"
  if [ -n "${1:-}" ]; then cp -a "$prefix/include/node" "$root.tmp/usr/local/include/node"; fi
  chroot "$root.tmp" /usr/local/bin/node --version >/dev/null || die "node does not run in the new root"
  # Like the node images: user node (1000:1000).
  chroot "$root.tmp" groupadd --gid 1000 node
  chroot "$root.tmp" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
  rm -rf "$root.tmp"/var/cache/apt/archives/*.deb "$root.tmp"/var/lib/apt/lists/*
  mv "$root.tmp" "$root"
}

# The host's trust store (with its own authorities: a company CA, a TLS-inspecting
# egress proxy) replaces the image's, so npm in the build stage reaches the registry
# the way the host does. Rerun on every import: idempotent.
add_host_cas() {
  local root=$1 bundle=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
  [ -s "$bundle" ] || return 0
  mkdir -p "$root/etc/ssl/certs"
  cp "$bundle" "$root/etc/ssl/certs/ca-certificates.crt"
}

import_root() { # <root> <image> [--change instruction]...: one ENV per instruction
  local root=$1 image=$2
  shift 2
  add_host_cas "$root"
  log "importing $image"
  tar -C "$root" --numeric-owner -c . | podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "ENV NODE_VERSION=${node_version#v}" \
    "$@" \
    --change 'CMD ["node"]' - "$image" >/dev/null || die "podman import $image failed"
}

if ! present "$NODE_IMAGE"; then
  [ -d "$CACHE/node-$node_version" ] || make_root "$CACHE/node-$node_version" ""
  import_root "$CACHE/node-$node_version" "$NODE_IMAGE"
fi
if ! present "$BUILD_IMAGE"; then
  [ -d "$CACHE/node-build-$node_version" ] || make_root "$CACHE/node-build-$node_version" "python3,make,g++"
  # node-gyp builds against these headers instead of downloading them.
  import_root "$CACHE/node-build-$node_version" "$BUILD_IMAGE" \
    --change "ENV npm_config_nodedir=/usr/local" --change "ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt"
fi
echo "NODE_IMAGE=$NODE_IMAGE"
echo "BUILD_IMAGE=$BUILD_IMAGE"
