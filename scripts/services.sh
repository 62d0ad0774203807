#!/usr/bin/env bash
# Makes sure the real services the test suite talks to are up, starting or
# installing them when they are missing (a fresh CI machine has nothing that a
# session installed by hand). Sourced by scripts/test.sh; each ensure_* prints
# what it did and returns non-zero when the service cannot be had.
#
# Overridable: TEST_PG_HOST/PORT/USER (127.0.0.1/5432/postgres), TEST_AMQP_URL.

PG_HOST=${TEST_PG_HOST:-127.0.0.1}
PG_PORT=${TEST_PG_PORT:-5432}
PG_USER=${TEST_PG_USER:-postgres}
PG_DB=${TEST_PG_DB:-orloj_test}

log() { echo "[services] $*" >&2; }

apt_install() {
  [ "$(id -u)" = 0 ] || { log "not root: cannot apt-get install $*"; return 1; }
  if [ -z "${_APT_UPDATED:-}" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 || true
    _APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1
}

wait_for() { # seconds command...
  local n=$1; shift
  for _ in $(seq 1 "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  return 1
}

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

ensure_postgres() {
  if ! command -v pg_isready >/dev/null 2>&1; then
    log "installing postgresql"; apt_install postgresql || return 1
  fi
  if ! pg_isready -q -h "$PG_HOST" -p "$PG_PORT"; then
    log "starting postgresql"
    local v
    for v in $(ls /etc/postgresql 2>/dev/null); do
      pg_ctlcluster --skip-systemctl-redirect "$v" main start >/dev/null 2>&1 || true
    done
    wait_for 30 pg_isready -q -h "$PG_HOST" -p "$PG_PORT" || { log "postgresql did not come up"; return 1; }
  fi
  # A fresh install uses peer auth on the socket and md5 on TCP; the suite
  # connects over TCP as $PG_USER without a password (trust), as on CI machines.
  if ! psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -Atc 'select 1' >/dev/null 2>&1; then
    log "enabling trust auth for local TCP connections"
    local hba
    hba=$(su postgres -c "psql -Atc 'show hba_file'" 2>/dev/null) || return 1
    sed -i -E 's/^(host\s+all\s+all\s+(127\.0\.0\.1\/32|::1\/128)\s+)\S+/\1trust/' "$hba"
    su postgres -c "psql -Atc 'select pg_reload_conf()'" >/dev/null 2>&1
    sleep 1
  fi
  if ! psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -Atc "select 1 from pg_database where datname='$PG_DB'" | grep -q 1; then
    psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -qc "create database $PG_DB" >/dev/null || return 1
  fi
  export TEST_DATABASE_URL="postgres://$PG_USER@$PG_HOST:$PG_PORT/$PG_DB"
  log "postgresql ready: $TEST_DATABASE_URL"
}

ensure_rabbitmq() {
  if ! port_open 127.0.0.1 5672; then
    if ! command -v rabbitmq-server >/dev/null 2>&1; then
      log "installing rabbitmq-server"; apt_install rabbitmq-server || return 1
    fi
    log "starting rabbitmq"
    rabbitmq-server -detached >/dev/null 2>&1 || true
    wait_for 90 port_open 127.0.0.1 5672 || { log "rabbitmq did not come up"; return 1; }
  fi
  export TEST_AMQP_URL="${TEST_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672}"
  log "rabbitmq ready"
}

# The dashboard's browser tests drive Debian's Chromium through playwright-core
# (never a browser downloaded by a test tool). A no-op when it is installed.
ensure_chromium() {
  local bin=${CHROMIUM_PATH:-/usr/bin/chromium}
  if [ ! -x "$bin" ]; then
    log "installing chromium"
    apt_install chromium || { log "chromium could not be installed"; return 1; }
  fi
  [ -x "$bin" ] || return 1
  export TEST_CHROMIUM="$bin"
  log "chromium ready: $bin"
}

# Prometheus and promtool from Debian's package: the observability tests check
# deploy/observability/ with promtool and scrape a distributed run with a
# Prometheus of their own (on a free port, scratch storage). Only the binaries
# are used; the package's own service is not needed.
ensure_prometheus() {
  if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    log "installing prometheus"
    apt_install prometheus || { log "prometheus could not be installed"; return 1; }
  fi
  command -v promtool >/dev/null 2>&1 || return 1
  export TEST_PROMETHEUS="$(command -v prometheus)"
  log "prometheus ready: $TEST_PROMETHEUS"
}
