import crypto from 'node:crypto';
import { Agent, request } from 'undici';
import { sleep, summarize, type Summary } from './stats.js';

/**
 * What one signed-in user does to set orloj up: creates one-minute HEARTBEAT
 * workflows through `POST /workflows`, one at a time on a fixed pace (N/60 a
 * second, so their builds, and so their slots, spread over the minute), each
 * call timed from send to the end of the answer.
 */
export interface CreateResult {
  count: number;
  /** From the first send to the last answer. */
  ms: number;
  /** Calls by HTTP status ("error" for a failed connection). */
  statuses: Record<string, number>;
  /** The first non-201 answer, for the report. */
  firstError: string | undefined;
  /** How many calls the first and last summaries cover (1,000, fewer when N < 2,000). */
  k: number;
  first: Summary;
  last: Summary;
  /** When the last answer arrived (Date.now()). */
  endedAt: number;
}

/** A valid HEARTBEAT workflow of the contract (seed: POST /workflows), one minute between checks. */
function heartbeat(i: number, endpoint: string): string {
  return JSON.stringify({
    name: `Heartbeat ${i}`,
    payload: JSON.stringify({ endpoint, method: 'GET', expected_status_code: 200, timeout: '10s' }),
    kind: 'HEARTBEAT',
    interval: 1,
    max_consecutive_job_failures_allowed: 3,
  });
}

export async function createHeartbeats(arg: {
  url: string;
  cookie: string;
  count: number;
  endpoint: string;
  /** At most this many calls in flight (and connections); the pace waits for a free one. */
  connections: number;
  log(message: string): void;
}): Promise<CreateResult> {
  const { count, connections } = arg;
  const agent = new Agent({ connections, keepAliveTimeout: 60_000 });
  const spacing = 60_000 / count;
  const latencies = new Array<number>(count).fill(Number.NaN);
  const statuses: Record<string, number> = {};
  let firstError: string | undefined;
  let inFlight = 0;
  let freed: (() => void) | undefined;
  const calls: Promise<void>[] = [];
  const started = performance.now();
  let lastLog = started;

  const one = async (i: number) => {
    const t0 = performance.now();
    try {
      const res = await request(`${arg.url}/workflows`, {
        method: 'POST',
        dispatcher: agent,
        headers: { cookie: arg.cookie, 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
        body: heartbeat(i, arg.endpoint),
      });
      const text = await res.body.text();
      latencies[i] = performance.now() - t0;
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      if (res.statusCode !== 201) firstError ??= `${res.statusCode} ${text.slice(0, 300)}`;
    } catch (err) {
      statuses.error = (statuses.error ?? 0) + 1;
      firstError ??= err instanceof Error ? err.message : String(err);
    } finally {
      inFlight -= 1;
      freed?.();
    }
  };

  for (let i = 0; i < count; i++) {
    const due = started + i * spacing;
    const now = performance.now();
    if (due > now) await sleep(due - now);
    while (inFlight >= connections) await new Promise<void>((resolve) => (freed = resolve));
    inFlight += 1;
    calls.push(one(i));
    if (performance.now() - lastLog >= 15_000) {
      lastLog = performance.now();
      arg.log(`created ${i + 1 - inFlight} of ${count} in ${Math.round((lastLog - started) / 1000)} s (${inFlight} in flight)`);
    }
  }
  await Promise.all(calls);
  const ms = performance.now() - started;
  await agent.close();
  const k = Math.min(1000, Math.floor(count / 2));
  return {
    count,
    ms,
    statuses,
    firstError,
    k,
    first: summarize(latencies.slice(0, k).filter(Number.isFinite)),
    last: summarize(latencies.slice(count - k).filter(Number.isFinite)),
    endedAt: Date.now(),
  };
}
