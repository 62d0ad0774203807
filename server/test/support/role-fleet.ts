import { RoleProcess, type RoleProcessEnv } from '@orloj/common/test-support';

/** The port a started role process serves /livez, /readyz and /metrics on (the api's own, or OPS_PORT). */
export function probePort(p: RoleProcess): number {
  for (const line of p.output.split('\n')) {
    if (!line.startsWith('{')) continue;
    // The announcement printed whatever LOG_LEVEL says.
    const entry = JSON.parse(line) as { msg?: string; port?: number; opsPort?: number };
    if (entry.msg?.startsWith('orloj is running')) return entry.port ?? entry.opsPort!;
  }
  throw new Error(`${p.role} printed no port:\n${p.output}`);
}

/** One process per role on PostgreSQL and RabbitMQ, each on a free port (PORT=0, OPS_PORT=0). */
export function roleFleet(roles: readonly string[], env: RoleProcessEnv, extra: (role: string) => Record<string, string> = () => ({})): RoleProcess[] {
  return roles.map((role) => new RoleProcess(role, env, { PORT: '0', OPS_PORT: '0', ...extra(role) }));
}

export interface Probe {
  status: number;
  body: string;
}

export async function probe(port: number, path: string, headers: Record<string, string> = {}): Promise<Probe & { headers: Headers }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers });
  return { status: res.status, body: await res.text(), headers: res.headers };
}

/** Polls until `ok` holds for the probe's answer (generous: the machine is shared). */
export async function probeUntil(port: number, path: string, ok: (p: Probe) => boolean, what: string, ms = 60_000): Promise<Probe> {
  const deadline = Date.now() + ms;
  let last: Probe | undefined;
  for (;;) {
    try {
      last = await probe(port, path);
      if (ok(last)) return last;
    } catch (err) {
      last = { status: 0, body: String(err) };
    }
    if (Date.now() > deadline) throw new Error(`${what}: last answer ${last.status} ${last.body}`);
    await new Promise((r) => setTimeout(r, 250)); // poll interval: a probe of another process
  }
}
