/**
 * Bulk actions on the workflow list (issue 25): one action for each selected
 * workflow, through the same endpoints as the workflow page, a few requests
 * at a time, each with its own Idempotency-Key so that a repeated click
 * replays instead of acting twice. Each workflow's result is reported.
 */
import { api, type Workflow } from './client';
import { networkError, toApiError, type ApiError } from './problem';

export type BulkAction = 'pause' | 'resume' | 'run' | 'terminate';

/** What became of one workflow: done, already so (nothing changed), or refused (the problem's title and detail). */
export type BulkOutcome = 'waiting' | 'done' | 'already' | 'refused';

export interface BulkResult {
  id: string;
  name: string;
  outcome: BulkOutcome;
  message: string;
}

/** Requests in flight at once: the api's general rate limit is 20/s with a burst of 40. */
export const BULK_CONCURRENCY = 4;
/** Attempts of one request answered 429 or 503 (each waits the answer's Retry-After). */
export const BULK_ATTEMPTS = 5;
const MAX_WAIT_MS = 30_000;

export const BULK_LABELS: Record<BulkAction, { verb: string; done: string }> = {
  pause: { verb: 'Pause', done: 'paused' },
  resume: { verb: 'Resume', done: 'resumed' },
  run: { verb: 'Run now', done: 'run scheduled' },
  terminate: { verb: 'Terminate', done: 'terminated' },
};

function send(action: BulkAction, id: string, key: string): Promise<{ data?: unknown; error?: unknown; response: Response }> {
  const path = { path: { workflow_id: id } };
  const headers = { 'Idempotency-Key': key };
  switch (action) {
    case 'pause':
      return api.POST('/workflows/{workflow_id}/pause', { params: path, headers });
    case 'resume':
      return api.POST('/workflows/{workflow_id}/resume', { params: path, headers });
    case 'run':
      return api.POST('/workflows/{workflow_id}/jobs/schedule', { params: { ...path, header: headers } });
    case 'terminate':
      // PATCH takes no Idempotency-Key (the api ignores it); a repeat is 412 workflow_terminated.
      return api.PATCH('/workflows/{workflow_id}', { params: path, headers });
  }
}

/** Seconds of a Retry-After header (delta-seconds or an HTTP date), as milliseconds; 1 s when absent. */
export function retryAfterMs(header: string | null, now = Date.now()): number {
  if (header === null || header.trim() === '') return 1_000;
  const seconds = Number(header);
  const ms = Number.isFinite(seconds) ? seconds * 1_000 : Date.parse(header) - now;
  return Number.isFinite(ms) ? Math.min(Math.max(ms, 0), MAX_WAIT_MS) : 1_000;
}

export interface BulkOptions {
  /** The Idempotency-Key of this action on this workflow (the same one for a repeated click). */
  keyFor: (action: BulkAction, id: string) => string;
  /** Each workflow's result as soon as it is known. */
  onResult: (result: BulkResult) => void;
  concurrency?: number;
  sleep?: (ms: number) => Promise<void>;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function refusal(w: Workflow, error: ApiError): BulkResult {
  const { title, detail } = error.problem;
  return { id: w.id, name: w.name, outcome: 'refused', message: [title, detail].filter(Boolean).join(': ') || error.message };
}

/** Reads one definite answer as this workflow's result. */
function resultOf(action: BulkAction, w: Workflow, response: Response, error: ApiError | undefined, data: unknown): BulkResult {
  const base = { id: w.id, name: w.name };
  if (error) {
    if (action === 'terminate' && error.code === 'workflow_terminated') return { ...base, outcome: 'already', message: 'already terminated' };
    return refusal(w, error);
  }
  const replayed = response.headers.get('Idempotent-Replayed') === 'true';
  const job = action === 'run' ? ` (job ${(data as { id?: string } | undefined)?.id ?? '?'})` : '';
  if (replayed) return { ...base, outcome: 'already', message: `already ${BULK_LABELS[action].done} by an earlier click${job}` };
  if (action === 'pause' && w.paused_at) return { ...base, outcome: 'already', message: 'already paused' };
  if (action === 'resume' && !w.paused_at) return { ...base, outcome: 'already', message: 'was not paused' };
  return { ...base, outcome: 'done', message: `${BULK_LABELS[action].done}${job}` };
}

/** One workflow: the request, again after Retry-After while the api says 429 or 503. */
async function runOne(action: BulkAction, w: Workflow, options: BulkOptions): Promise<BulkResult> {
  const sleep = options.sleep ?? defaultSleep;
  const key = options.keyFor(action, w.id);
  for (let attempt = 1; ; attempt++) {
    let answer: Awaited<ReturnType<typeof send>>;
    try {
      answer = await send(action, w.id, key);
    } catch {
      return refusal(w, networkError());
    }
    const { response } = answer;
    const error = response.ok ? undefined : toApiError(response, answer.error);
    if ((response.status === 429 || response.status === 503) && attempt < BULK_ATTEMPTS) {
      await sleep(retryAfterMs(response.headers.get('Retry-After')));
      continue;
    }
    return resultOf(action, w, response, error, answer.data);
  }
}

/** Runs the action for every workflow, at most `concurrency` at a time; resolves with every result, in the workflows' order. */
export async function runBulk(action: BulkAction, workflows: readonly Workflow[], options: BulkOptions): Promise<BulkResult[]> {
  const results: BulkResult[] = new Array<BulkResult>(workflows.length);
  let next = 0;
  const worker = async () => {
    while (next < workflows.length) {
      const i = next++;
      results[i] = await runOne(action, workflows[i]!, options);
      options.onResult(results[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency ?? BULK_CONCURRENCY, workflows.length) }, worker));
  return results;
}
