import crypto from 'node:crypto';
import { promisify } from 'node:util';
import { percentile } from './stats.js';

/**
 * The api reads of issue 28, target 3, timed one after another against a
 * running api: the workflow list's first page with health, and a job page
 * (the workflow's jobs, the job).
 */

const scrypt = promisify(crypto.scrypt) as (password: string, salt: Buffer, keylen: number, options: crypto.ScryptOptions) => Promise<Buffer>;

export const BENCH_PASSWORD = 'benchmark password';

/** A stored password hash in api/src/http/password.ts's format (`scrypt$N$r$p$salt$hash`), so the seeded user can sign in. */
export async function benchPasswordHash(): Promise<string> {
  const [n, r, p] = [32768, 8, 1];
  const salt = crypto.randomBytes(16);
  const key = await scrypt(BENCH_PASSWORD, salt, 32, { N: n, r, p, maxmem: 64 * 1024 * 1024 });
  return `scrypt$${n}$${r}$${p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

/** Signs in; the Cookie header a browser would then send. */
export async function signIn(url: string, email: string): Promise<string> {
  const res = await fetch(`${url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: BENCH_PASSWORD }) });
  if (res.status !== 200) throw new Error(`login answered ${res.status}: ${await res.text()}`);
  return res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .join('; ');
}

export interface ReadTiming {
  label: string;
  calls: number;
  p50: number;
  p99: number;
  mean: number;
  bytes: number;
}

export async function timeReads(url: string, cookie: string, reads: ReadonlyArray<{ label: string; path: string }>, calls: number): Promise<ReadTiming[]> {
  const out: ReadTiming[] = [];
  for (const { label, path } of reads) {
    const ms: number[] = [];
    let bytes = 0;
    for (let i = 0; i < calls + 3; i++) {
      const t = performance.now();
      const res = await fetch(`${url}${path}`, { headers: { cookie } });
      const body = await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}: ${Buffer.from(body).toString()}`);
      // The first three warm the connection and the api's compiled reads.
      if (i >= 3) ms.push(performance.now() - t);
      bytes = body.byteLength;
    }
    ms.sort((a, b) => a - b);
    out.push({ label, calls, p50: percentile(ms, 50), p99: percentile(ms, 99), mean: ms.reduce((a, b) => a + b, 0) / ms.length, bytes });
  }
  return out;
}
