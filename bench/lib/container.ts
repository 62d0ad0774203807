import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import path from 'node:path';
import { REPO_ROOT } from './child.js';
import type { EmbeddedOrloj } from './embedded.js';
import type { SuiteContext, SuiteReport } from './suite.js';
import { sleep } from './stats.js';

/**
 * What the suites that run CONTAINER jobs on the embedded orloj share: the
 * runtime, the api calls a user makes, and polling.
 */

/** Built by scripts/container-runtime.sh: static busybox, no CMD. */
export const IMAGE = 'localhost/orloj-test/busybox:1';
export const POLL_MS = 20;

/** `scripts/container-runtime.sh ensure`: the DOCKER_HOST of the podman service, or why there is none. */
export function ensureRuntime(): { dockerHost: string } | { failure: string } {
  const r = spawnSync('bash', [path.join(REPO_ROOT, 'scripts', 'container-runtime.sh'), 'ensure'], { encoding: 'utf8', timeout: 10 * 60_000 });
  const dockerHost = r.stdout?.trim();
  if (r.status === 0 && dockerHost) return { dockerHost };
  const why = (r.stderr ?? '').trim().split('\n').slice(-3).join(' / ') || r.error?.message || `exit ${r.status}`;
  return { failure: `scripts/container-runtime.sh ensure failed: ${why}` };
}

export function podmanVersion(): string {
  const r = spawnSync('podman', ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : 'podman (version unknown)';
}

/** One api call with the user's cookies (and an Idempotency-Key on writes); the JSON answer. */
export async function api(orloj: Pick<EmbeddedOrloj, 'url'>, cookie: string, method: string, url: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${orloj.url}${url}`, {
    method,
    headers: {
      cookie,
      ...(method === 'GET' ? {} : { 'idempotency-key': crypto.randomUUID() }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as unknown) : undefined };
}

/** Polls `read` every POLL_MS until `ok`; rejects after `timeoutMs`. */
export async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(v)}`);
    await sleep(POLL_MS);
  }
}

/**
 * Creates a CONTAINER workflow (a week between automatic runs, so only manual
 * jobs run) and waits for its build; returns its id and the build time (ms).
 */
export async function createContainerWorkflow(
  orloj: Pick<EmbeddedOrloj, 'url'>,
  cookie: string,
  name: string,
  payload: { image: string; cmd: string[]; timeout: string },
  extra: Record<string, unknown> = {},
): Promise<{ id: string; buildMs: number }> {
  const created = await api(orloj, cookie, 'POST', '/workflows', {
    name,
    kind: 'CONTAINER',
    interval: 10_080,
    max_consecutive_job_failures_allowed: 3,
    payload: JSON.stringify(payload),
    ...extra,
  });
  if (created.status !== 201) throw new Error(`POST /workflows answered ${created.status}: ${JSON.stringify(created.json)}`);
  const id = created.json.id as string;
  const buildStarted = performance.now();
  const w = await until(
    () => api(orloj, cookie, 'GET', `/workflows/${id}`).then((r) => r.json as { build_status: string }),
    (v) => v.build_status === 'COMPLETED' || v.build_status === 'FAILED',
    'the build',
    60_000,
  );
  if (w.build_status !== 'COMPLETED') throw new Error(`the build of the CONTAINER workflow ended ${w.build_status}`);
  return { id, buildMs: performance.now() - buildStarted };
}

/** POST …/jobs/schedule: a manual job of the workflow; its id. */
export async function scheduleJob(orloj: Pick<EmbeddedOrloj, 'url'>, cookie: string, workflowId: string): Promise<string> {
  const scheduled = await api(orloj, cookie, 'POST', `/workflows/${workflowId}/jobs/schedule`);
  if (scheduled.status !== 201) throw new Error(`POST /workflows/${workflowId}/jobs/schedule answered ${scheduled.status}: ${JSON.stringify(scheduled.json)}`);
  return scheduled.json.id as string;
}

/**
 * The podman service (logged with its version), or, when there is none, the
 * report of a suite that could not run: its description and settings, one
 * "not run" row, the target not measured. A missing runtime does not fail the
 * bench run.
 */
export function runtimeOrSkipped(
  ctx: SuiteContext,
  report: { description: string; settings: Array<[string, string]>; columns: string[]; target: string },
): { dockerHost: string; skipped?: undefined } | { skipped: SuiteReport } {
  const runtime = ensureRuntime();
  if ('failure' in runtime) {
    ctx.log(`skipped: ${runtime.failure}`);
    return {
      skipped: {
        description: report.description,
        settings: report.settings,
        table: { columns: report.columns, rows: [['(all)', `not run: ${runtime.failure}`, ...report.columns.slice(2).map(() => '')]] },
        verdict: [report.target, '', '- **not measured**: no container runtime (see the row).'],
        notes: ['- Skipped because `scripts/container-runtime.sh ensure` failed; the numbers of an earlier run are gone with this section.'],
        valid: true,
      },
    };
  }
  ctx.log(`runtime ${runtime.dockerHost}, ${podmanVersion()}`);
  return runtime;
}
