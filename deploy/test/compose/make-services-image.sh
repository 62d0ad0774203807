#!/usr/bin/env bash
# Test only. No registry is reachable here, so compose's public PostgreSQL, RabbitMQ and
# nginx images are stood in for by one local image with Debian's packages of the three,
# built from deploy/image/make-base.sh's cached Debian root. override.yaml starts each
# the way the official image does (entrypoint.sh). Prints the image name; an image
# already present is kept. Needs root.
set -euo pipefail
IMAGE=localhost/orloj-test/services:1
CACHE=${ORLOJ_IMAGE_BASE_DIR:-/var/tmp/orloj-image-base}
log() { echo "[services-image] $*" >&2; }

if podman image exists "$IMAGE"; then echo "$IMAGE"; exit 0; fi
exec 9>"$CACHE/services.lock"
flock -w 900 9
if podman image exists "$IMAGE"; then echo "$IMAGE"; exit 0; fi

base=$(ls -d "$CACHE"/node-v* 2>/dev/null | grep -v build | head -1)
[ -n "$base" ] || { log "no cached Debian root in $CACHE: run deploy/image/make-base.sh first"; exit 1; }
root="$CACHE/services.tmp"
rm -rf "$root"
cp -a "$base" "$root"
cleanup() {
  umount "$root/proc" 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT
mount -t proc proc "$root/proc"
# No service starts inside the chroot; no default PostgreSQL cluster.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
mkdir -p "$root/etc/postgresql-common"
echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.conf"
# The official images' users: postgres and rabbitmq are uid/gid 999 there.
chroot "$root" groupadd -g 999 postgres
chroot "$root" useradd -u 999 -g 999 -d /var/lib/postgresql -s /bin/bash postgres
chroot "$root" groupadd -o -g 999 rabbitmq
chroot "$root" useradd -o -u 999 -g 999 -d /var/lib/rabbitmq -s /bin/sh rabbitmq
log "installing postgresql, rabbitmq-server and nginx-light (once)"
cp /etc/resolv.conf "$root/etc/resolv.conf"
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  postgresql-15 postgresql-client-15 rabbitmq-server nginx-light openssl >&2
rm -f "$root/usr/sbin/policy-rc.d" "$root/etc/nginx/sites-enabled/default"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/rabbitmq/* "$root"/var/lib/postgresql/*
umount "$root/proc"
log "importing $IMAGE"
tar -C "$root" --numeric-owner -c . | podman import --quiet \
  --change 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  - "$IMAGE" >/dev/null
echo "$IMAGE"
