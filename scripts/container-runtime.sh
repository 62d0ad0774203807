#!/usr/bin/env bash
# Makes a real Docker-Engine-API compatible container runtime available for the
# CONTAINER job executor and its tests (called by scripts/test.sh on every run).
#
#   scripts/container-runtime.sh ensure   # prints ONLY the DOCKER_HOST url on stdout
#   scripts/container-runtime.sh stop     # stops the API service started by `ensure`
#   scripts/container-runtime.sh status   # exit 0 when the socket answers
#
# All logging goes to stderr; `ensure` exits non-zero when no runtime can be had.
#
# Facts this relies on (verified on the project's Debian 12 machines, root; see
# docs/container-runtime.md and the shared environment notes on container runtimes):
# - There is no Docker daemon and no registry is reachable. The Debian packages
#   `podman` (4.3) + `runc` serve the Docker Engine API (v1.41 paths) through
#   `podman system service --time=0 unix://<dir>/podman.sock`; dockerode talks
#   to it unchanged.
# - The default OCI runtime `crun` fails here ("cgroups in hybrid mode not
#   supported"): containers.conf must select `runc`.
# - The kernel refuses setrlimit above the current limits, so containers.conf
#   sets explicit default ulimits (nofile/nproc 1024). The file is passed to the
#   service through the CONTAINERS_CONF environment variable.
# - Containers get a user namespace each (Podman's UsernsMode "auto"): the ids
#   come from a "containers" range in /etc/subuid and /etc/subgid, added here.
# - Pulls from remote registries fail fast (DNS), which gives a realistic
#   IMAGE_PULL_FAILED case. Test images are built locally instead: the static
#   busybox of `busybox-static` plus one symlink per applet, packed with tar and
#   loaded with `podman import` as localhost/orloj-test/busybox:1 (no CMD, so
#   every job names its command).
#
# State (config, socket, pid file, service log) lives in
# ${ORLOJ_PODMAN_DIR:-/var/tmp/orloj-podman}, never inside the repository.
# Image storage is podman's default for root (/var/lib/containers/storage).
#
# Fast path (service answering, image present): two curl calls over the socket,
# a few milliseconds. The slow path is serialised with flock, so concurrent test
# runs neither start two services nor import the image twice.
set -euo pipefail

STATE_DIR=${ORLOJ_PODMAN_DIR:-/var/tmp/orloj-podman}
case "$STATE_DIR" in /*) ;; *) STATE_DIR="$PWD/$STATE_DIR" ;; esac
SOCK="$STATE_DIR/podman.sock"
CONF="$STATE_DIR/containers.conf"
PID_FILE="$STATE_DIR/service.pid"
SERVICE_LOG="$STATE_DIR/service.log"
TEST_IMAGES=("localhost/orloj-test/busybox:1")
START_TIMEOUT_S=${ORLOJ_PODMAN_START_TIMEOUT:-60}

log() { echo "[container-runtime] $*" >&2; }
die() { log "$*"; exit 1; }

ping_ok() {
  [ -S "$SOCK" ] || return 1
  [ "$(curl -s --max-time 2 --unix-socket "$SOCK" http://d/_ping 2>/dev/null)" = OK ]
}

# 200 from the Docker API image inspect endpoint (names may contain slashes).
image_present() {
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --unix-socket "$SOCK" \
    "http://d/v1.41/images/$1/json" 2>/dev/null) || return 1
  [ "$code" = 200 ]
}

all_images_present() {
  local img
  for img in "${TEST_IMAGES[@]}"; do image_present "$img" || return 1; done
}

check_state_dir() {
  local repo dir
  repo=$(cd "$(dirname "$0")/.." && pwd -P)
  dir=$(realpath -m "$STATE_DIR")
  case "$dir/" in
    "$repo/"*) die "ORLOJ_PODMAN_DIR ($dir) must not be inside the repository ($repo)" ;;
  esac
  mkdir -p "$STATE_DIR"
}

_apt_updated=
apt_install() {
  [ "$(id -u)" = 0 ] || { log "not root: cannot apt-get install $*"; return 1; }
  command -v apt-get >/dev/null 2>&1 || { log "no apt-get: install $* by hand"; return 1; }
  if [ -z "$_apt_updated" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 || true
    _apt_updated=1
  fi
  log "installing $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 \
    || { log "apt-get install $* failed"; return 1; }
}

ensure_packages() {
  local missing=()
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  if ! static_busybox >/dev/null; then missing+=(busybox-static); fi
  if [ ${#missing[@]} -gt 0 ]; then apt_install "${missing[@]}" || return 1; fi
}

# Prints the path of a statically linked busybox, if there is one.
static_busybox() {
  local b
  for b in "${ORLOJ_BUSYBOX:-}" /bin/busybox /usr/bin/busybox; do
    if [ -z "$b" ] || [ ! -x "$b" ]; then continue; fi
    # ldd fails on a static binary ("not a dynamic executable").
    if ! LC_ALL=C ldd "$b" >/dev/null 2>&1; then echo "$b"; return 0; fi
  done
  return 1
}

write_conf() {
  local tmp="$CONF.tmp.$$"
  cat >"$tmp" <<'EOF'
# Written by scripts/container-runtime.sh (orloj). Passed to podman via CONTAINERS_CONF.
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

[engine]
runtime = "runc"
EOF
  if cmp -s "$tmp" "$CONF"; then rm -f "$tmp"; else mv -f "$tmp" "$CONF"; fi
}

# The pid from the pid file, when that process is still our podman service.
service_pid() {
  local pid
  [ -f "$PID_FILE" ] || return 1
  pid=$(cat "$PID_FILE" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "system service .*unix://$SOCK" || return 1
  echo "$pid"
}

stop_service() {
  local pid
  if pid=$(service_pid); then
    log "stopping podman service (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  elif ping_ok; then
    log "a service answers on $SOCK but was not started by this script; leaving it alone"
    return 1
  fi
  rm -f "$PID_FILE" "$SOCK"
}

start_service() {
  local pid
  # A dead service may have left a socket file or a hung process behind.
  if service_pid >/dev/null; then stop_service || true; fi
  rm -f "$SOCK"
  log "starting podman system service on unix://$SOCK"
  # From /, not the caller's folder: the service outlives it, and once that folder is
  # deleted (a checkout removed) every container it starts fails in conmon.
  CONTAINERS_CONF="$CONF" setsid nohup env -C / podman system service --time=0 "unix://$SOCK" \
    >"$SERVICE_LOG" 2>&1 </dev/null 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until ping_ok; do
    if ! kill -0 "$pid" 2>/dev/null; then
      log "podman service exited; last lines of $SERVICE_LOG:"
      tail -n 20 "$SERVICE_LOG" >&2 || true
      return 1
    fi
    [ "$SECONDS" -lt "$deadline" ] || { log "podman service did not answer within ${START_TIMEOUT_S}s"; return 1; }
    sleep 0.1
  done
  log "podman service ready (pid $pid)"
}

# A running service whose working folder was deleted: it answers pings, but its
# containers fail ("conmon: Failed to get working directory"). Restart such a one.
service_stranded() {
  local pid
  pid=$(service_pid) || return 1
  [[ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" == *" (deleted)" ]]
}

# Runs in a subshell so its EXIT trap removes the scratch folder whatever happens.
build_busybox_image() (
  set -e
  image=$1
  busybox=$(static_busybox) || { log "no static busybox found"; exit 1; }
  work=$(mktemp -d "${TMPDIR:-/tmp}/orloj-rootfs.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/root"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,proc,sys,dev,root,home,var/tmp}
  chmod 1777 "$work/root/tmp" "$work/root/var/tmp"
  cp "$busybox" "$work/root/bin/busybox"
  for applet in $("$busybox" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$work/root/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' >"$work/root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$work/root/etc/group"
  tar -C "$work/root" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
    -cf "$work/rootfs.tar" .
  log "importing $image"
  CONTAINERS_CONF="$CONF" podman import --quiet \
    --change 'ENV PATH=/bin:/sbin:/usr/bin:/usr/sbin' \
    --change 'LABEL orloj.test-image=true' \
    "$work/rootfs.tar" "$image" >/dev/null
)

ensure_images() {
  local img
  for img in "${TEST_IMAGES[@]}"; do
    image_present "$img" && continue
    case "$img" in
      localhost/orloj-test/busybox:*) build_busybox_image "$img" || return 1 ;;
      *) log "do not know how to build $img"; return 1 ;;
    esac
    image_present "$img" || { log "$img is still missing after the import"; return 1; }
  done
}

# orloj runs each container in a user namespace of its own (UsernsMode "auto",
# docs/container-runtime.md): rootful Podman takes the host ids for them from
# the ranges of the user "containers" in /etc/subuid and /etc/subgid (the user
# need not exist). The range is Podman's documented example, far above any
# real account.
SUBID_RANGE="containers:2147483647:2147483648"

subids_present() {
  local f
  for f in /etc/subuid /etc/subgid; do grep -q '^containers:' "$f" 2>/dev/null || return 1; done
}

ensure_subids() {
  local f
  for f in /etc/subuid /etc/subgid; do
    grep -q '^containers:' "$f" 2>/dev/null && continue
    [ "$(id -u)" = 0 ] || { log "not root: cannot add $SUBID_RANGE to $f (containers then fail; or set CONTAINER_USERNS=host)"; return 1; }
    log "adding $SUBID_RANGE to $f"
    echo "$SUBID_RANGE" >>"$f"
  done
}

ensure() {
  # Fast path: everything is already up.
  if ping_ok && all_images_present && subids_present && ! service_stranded; then
    echo "unix://$SOCK"
    return 0
  fi
  check_state_dir
  command -v curl >/dev/null 2>&1 || apt_install curl ca-certificates || die "curl is required"
  exec 9>"$STATE_DIR/lock"
  flock -w 300 9 || die "could not lock $STATE_DIR/lock"
  ensure_packages || die "podman, runc and busybox-static are required"
  ensure_subids || die "the subordinate id ranges for user namespaces could not be set up"
  write_conf
  if service_stranded; then
    log "the podman service runs in a deleted folder; restarting it"
    stop_service || true
  fi
  ping_ok || start_service || die "the podman API service could not be started"
  ensure_images || die "the test images could not be built"
  echo "unix://$SOCK"
}

case "${1:-}" in
  ensure) ensure ;;
  stop) stop_service ;;
  status) ping_ok ;;
  *) echo "usage: $0 ensure|stop|status" >&2; exit 2 ;;
esac
