/**
 * Readiness of one process: named checks, each cheap, each bounded by a
 * timeout. `/readyz` answers 200 when all pass and 503 naming the ones that
 * fail; `/livez` only proves the process answers. Concurrent probes share
 * one round of checks.
 */
export interface HealthCheck {
  /** Shown in the /readyz answer: `store`, `bus`, `scheduler`, … */
  name: string;
  /** Resolves (undefined or true) when ready; throws, or returns false or the reason, otherwise. */
  check(): Promise<boolean | string | void> | boolean | string | void;
}

export interface ReadinessReport {
  ready: boolean;
  checks: Record<string, { ok: boolean; detail?: string }>;
}

/** How long /readyz waits for each check. */
const CHECK_TIMEOUT_MS = 2_000;

export class Health {
  private readonly checks: HealthCheck[] = [];
  private running: Promise<ReadinessReport> | undefined;

  constructor(private readonly timeoutMs: number = CHECK_TIMEOUT_MS) {}

  add(check: HealthCheck): this {
    this.checks.push(check);
    return this;
  }

  /** Runs every check (at most one round at a time). */
  readiness(): Promise<ReadinessReport> {
    this.running ??= this.evaluate().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async evaluate(): Promise<ReadinessReport> {
    const results = await Promise.all(this.checks.map(async (c) => [c.name, await this.run(c)] as const));
    return { ready: results.every(([, r]) => r.ok), checks: Object.fromEntries(results) };
  }

  private async run(c: HealthCheck): Promise<{ ok: boolean; detail?: string }> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<{ ok: boolean; detail?: string }>((resolve) => {
      timer = setTimeout(() => resolve({ ok: false, detail: `no answer within ${this.timeoutMs} ms` }), this.timeoutMs);
    });
    try {
      const checked = Promise.resolve()
        .then(() => c.check())
        .then((r) => (r === undefined || r === true ? { ok: true } : { ok: false, detail: r === false ? 'not ready' : r }));
      return await Promise.race([checked, timeout]);
    } catch (err) {
      return { ok: false, detail: err instanceof Error ? err.message : String(err) };
    } finally {
      clearTimeout(timer);
    }
  }
}
