#!/usr/bin/env bash
# The whole test suite: type checks, lint, then every mocha test against real
# services, in tiers that run in parallel (scripts/test-tiers.mjs, docs/testing.md). With REQUIRE_SERVICES=1 (CI) a missing service is started or
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

# The dashboard's browser suite drives Debian's Chromium (dashboard/test/e2e.test.ts).
if [ "${REQUIRE_SERVICES:-0}" = 1 ] || [ ! -x /usr/bin/chromium ]; then
  ensure_chromium || [ "${REQUIRE_SERVICES:-0}" != 1 ] || fail_early "Chromium is required but could not be installed"
fi

# deploy/observability/ is checked with promtool; a Prometheus scrapes a distributed run.
if [ "${REQUIRE_SERVICES:-0}" = 1 ] || ! command -v promtool >/dev/null 2>&1; then
  ensure_prometheus || [ "${REQUIRE_SERVICES:-0}" != 1 ] || fail_early "Prometheus is required but could not be installed"
fi

echo "[test] type-checking" >&2
npx tsc -b || fail_early "type check (tsc -b) failed"
# Built from the sources just now: the suites' orloj processes start from server/dist,
# on half the CPU of a start through tsx (common/test/support/orloj-command.ts).
export ORLOJ_TEST_BUILT=1
npx tsc -p tsconfig.test.json || fail_early "type check of tests failed"
echo "[test] linting" >&2
npx eslint . || fail_early "lint failed"
# Generates the typed API client from the OpenAPI document, type-checks the
# app against it and builds the static files the browser suite is served.
echo "[test] building the dashboard" >&2
npm run build --silent -w @orloj/dashboard >&2 || fail_early "the dashboard build failed"

# Arguments: none (every tier, and Vitest), tier names (scripts/test-tiers.mjs:
# unit, integration, system, or one system-* part), or test files for one mocha run.
tiers=1
for arg in "$@"; do
  case "$arg" in
    unit|integration|system|system-server|system-deploy|system-ui|system-alone) ;;
    *) tiers=0 ;;
  esac
done

# The dashboard's component tests run in Vitest (jsdom); their counts join
# mocha's closing line through ORLOJ_EXTRA_COUNTS (scripts/mocha-reporter.cjs).
extra_failed=0
if [ $# -eq 0 ]; then
  echo "[test] dashboard component tests (Vitest)" >&2
  results=$(mktemp) counts=$(mktemp)
  trap 'rm -f "$results" "$counts"' EXIT
  (cd dashboard && npx vitest run --reporter=default --reporter=json --outputFile.json="$results")
  vitest_rc=$?
  node -e '
    const fs = require("fs");
    let r = {};
    try { r = JSON.parse(fs.readFileSync(process.argv[1], "utf8")); } catch {}
    const failed = r.numFailedTests || r.numFailedTestSuites || 0;
    const skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
    // As in mocha (forbid-pending), a skip where every service is required fails: nothing may quietly not run.
    const strict = process.env.REQUIRE_SERVICES === "1";
    if (strict && skipped) console.error(`${skipped} dashboard component test(s) skipped with REQUIRE_SERVICES=1: counted as failed`);
    const c = { name: "the dashboard component tests", passed: r.numPassedTests ?? 0, failed: failed + (strict ? skipped : 0), skipped: strict ? 0 : skipped };
    // Vitest failing without a failed test (a crash, a file that did not load) still counts as one failure.
    if (process.argv[2] !== "0" && c.failed === 0) c.failed = 1;
    fs.writeFileSync(process.argv[3], JSON.stringify(c));
    process.exit(c.failed ? 1 : 0);
  ' "$results" "$vitest_rc" "$counts" || extra_failed=1
  # Added to counts handed in from outside (.ci/run: the reference client suite).
  export ORLOJ_EXTRA_COUNTS="${ORLOJ_EXTRA_COUNTS:+$ORLOJ_EXTRA_COUNTS:}$counts"
fi
if [ "$tiers" = 1 ]; then
  node scripts/test-tiers.mjs "$@"
else
  npx mocha "$@"
fi
mocha_rc=$?
[ "$extra_failed" = 0 ] || exit 1
exit "$mocha_rc"
