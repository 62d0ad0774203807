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

# Arguments: none (every tier, and Vitest), tier names (scripts/test-tiers.mjs:
# unit, integration, system, or one system-* part), or test files for one mocha run.
tiers=1
for arg in "$@"; do
  case "$arg" in
    unit|integration|system|system-server|system-ui|system-alone) ;;
    *) tiers=0 ;;
  esac
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A check beside the tiers: its output is held and printed whole when it ends, and its
# verdict joins the closing line (ORLOJ_EXTRA_COUNTS) as one failure, or as nothing.
# Usage: beside <name> <counts file> <command…>
beside() {
  local name=$1 counts=$2 started=$SECONDS rc=0
  shift 2
  "$@" >"$counts.log" 2>&1 || rc=$?
  {
    echo
    echo "========== $name: $((SECONDS - started)) s, exit $rc =========="
    cat "$counts.log"
  } >&2
  printf '{"name":"%s","passed":0,"failed":%d,"skipped":0}\n' "$name" "$((rc != 0))" >"$counts"
}

# The tests' type check and the lint need nothing the tiers make, and the tiers need
# nothing from them: they run beside the tiers (docs/testing.md, "Tiers"), as does the
# dashboard's build (only the browser tier waits for it: ORLOJ_TIER_AFTER) and, with no
# arguments, its component tests.
beside "the tests' type check and the lint" "$work/checks.json" \
  bash -c 'npx tsc -p tsconfig.test.json && echo "[test] linting" && npx eslint .' &
# Generates the typed API client from the OpenAPI document, type-checks the app against
# it and builds the static files the browser suite is served; `built` says how it went.
dashboard() {
  if npm run build --silent -w @orloj/dashboard; then echo ok >"$work/built.tmp"; else echo "the dashboard build failed" >"$work/built.tmp"; fi
  mv "$work/built.tmp" "$work/built"
  grep -qx ok "$work/built" || return 1
  [ "$1" = 0 ] || return 0
  # The dashboard's component tests run in Vitest (jsdom).
  echo "[test] dashboard component tests (Vitest)"
  # Its verdict is its counts (below), not its exit code.
  (cd dashboard && npx vitest run --reporter=default --reporter=json --outputFile.json="$work/vitest.json") || true
}
export ORLOJ_TIER_AFTER="system-ui=$work/built"
beside "the dashboard's build and component tests" "$work/dashboard.json" dashboard $# &
extra="$work/checks.json:$work/dashboard.json"
if [ $# -eq 0 ]; then
  # Vitest's counts (written once the dashboard's part ends); as in mocha (forbid-pending),
  # a skip where every service is required fails: nothing may quietly not run.
  (
    wait_for() { while [ ! -s "$1" ]; do sleep 1; done; } # a file another process writes once
    wait_for "$work/dashboard.json"
    node -e '
      const fs = require("fs");
      let r = {};
      try { r = JSON.parse(fs.readFileSync(process.argv[1], "utf8")); } catch {}
      const failed = r.numFailedTests || r.numFailedTestSuites || 0;
      const skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
      const strict = process.env.REQUIRE_SERVICES === "1";
      if (strict && skipped) console.error(`${skipped} dashboard component test(s) skipped with REQUIRE_SERVICES=1: counted as failed`);
      const c = { name: "the dashboard component tests", passed: r.numPassedTests ?? 0, failed: failed + (strict ? skipped : 0), skipped: strict ? 0 : skipped };
      // No results at all (Vitest crashed, a file did not load, or the build before it failed): no count to trust.
      // Vitest failing without a failed test (an error outside the tests) still counts as one failure.
      if (!r.numTotalTests || (r.success === false && c.failed === 0)) c.failed = Math.max(c.failed, 1);
      fs.writeFileSync(process.argv[2], JSON.stringify(c));
    ' "$work/vitest.json" "$work/vitest-counts.json"
  ) &
  extra="$extra:$work/vitest-counts.json"
fi
# Added to counts handed in from outside (.ci/run: the reference client suite); the
# closing line waits for every one of them.
export ORLOJ_EXTRA_COUNTS="${ORLOJ_EXTRA_COUNTS:+$ORLOJ_EXTRA_COUNTS:}$extra"
export ORLOJ_EXTRA_COUNTS_WAIT_MS="${ORLOJ_EXTRA_COUNTS_WAIT_MS:-3600000}"
if [ "$tiers" = 1 ]; then
  node scripts/test-tiers.mjs "$@"
else
  # One mocha run of the files named: the checks first, as before.
  wait
  npx mocha "$@"
fi
mocha_rc=$?
wait
# A check beside the tiers that failed fails the run (its count is in the closing line).
grep -qE '"failed":[1-9]' "$work"/*.json && exit 1
exit "$mocha_rc"
