#!/usr/bin/env bash
# The reference project's own dashboard against orloj, in real Chromium
# (dashboard/test/reference-client.suite.ts; docs/testing.md): search
# highlights, notifications marked read across the next poll, and the end of a
# live tail without an error toast. Kept out of `npm test` because building
# the reference app takes minutes on a cold cache (later runs reuse it from
# /var/tmp/orloj-reference-client). .ci/run calls it before `npm test` and adds
# its counts to the closing line.
#
#   scripts/reference-client.sh [counts.json]
#
# Ends with its own "N passed, N failed, N skipped" line; with a file argument
# it also writes its counts there ({name, passed, failed, skipped}), for
# ORLOJ_EXTRA_COUNTS (scripts/mocha-reporter.cjs). With REQUIRE_SERVICES=1
# Chromium and the container runtime are installed or started when missing,
# and a missing one fails the suite instead of skipping it.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/services.sh

counts=${1:-}
name="the reference client suite"

fail_early() {
  echo "$1" >&2
  [ -z "$counts" ] || printf '{"name":"%s","passed":0,"failed":1,"skipped":0}\n' "$name" >"$counts"
  echo
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
}

if [ "${REQUIRE_SERVICES:-0}" = 1 ] || [ ! -x /usr/bin/chromium ]; then
  ensure_chromium || [ "${REQUIRE_SERVICES:-0}" != 1 ] || fail_early "Chromium is required but could not be installed"
fi
if out=$(scripts/container-runtime.sh ensure); then
  export TEST_DOCKER_HOST="$out"
elif [ "${REQUIRE_SERVICES:-0}" = 1 ]; then
  fail_early "a container runtime is required but could not be started"
fi

echo "[reference-client] the reference project's dashboard against orloj (dashboard/test/reference-client.suite.ts)" >&2
ORLOJ_COUNTS_OUT="$counts" ORLOJ_COUNTS_NAME="$name" npx mocha dashboard/test/reference-client.suite.ts
