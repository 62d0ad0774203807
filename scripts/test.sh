#!/usr/bin/env bash
# The whole test suite: type checks, lint, then every mocha test against real
# services. With REQUIRE_SERVICES=1 (CI) a missing service is started or
# installed, and a suite whose service is still missing fails instead of
# skipping. Always ends with the line "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/services.sh

fail_early() {
  echo "$1" >&2
  echo
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
}

if [ "${REQUIRE_SERVICES:-0}" = 1 ] || [ -z "${TEST_DATABASE_URL:-}" ]; then
  ensure_postgres || [ "${REQUIRE_SERVICES:-0}" != 1 ] || fail_early "PostgreSQL is required but could not be started"
fi
if [ "${REQUIRE_SERVICES:-0}" = 1 ] || [ -z "${TEST_AMQP_URL:-}" ]; then
  ensure_rabbitmq || [ "${REQUIRE_SERVICES:-0}" != 1 ] || fail_early "RabbitMQ is required but could not be started"
fi
if [ -x scripts/container-runtime.sh ]; then
  if out=$(scripts/container-runtime.sh ensure); then
    export TEST_DOCKER_HOST="$out"
  elif [ "${REQUIRE_SERVICES:-0}" = 1 ]; then
    fail_early "a container runtime is required but could not be started"
  fi
fi

echo "[test] type-checking" >&2
npx tsc -b || fail_early "type check (tsc -b) failed"
npx tsc -p tsconfig.test.json || fail_early "type check of tests failed"
echo "[test] linting" >&2
npx eslint . || fail_early "lint failed"

if [ $# -eq 0 ]; then set -- "*/test/**/*.test.ts"; fi
npx mocha "$@"
