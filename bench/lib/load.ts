import autocannon from 'autocannon';
import { meterCpu, meterMachineCpu, meterOwnCpu } from './cpu.js';

export interface LoadSettings {
  /** Measured run, seconds. */
  duration: number;
  connections: number;
  /** Unmeasured run before it, seconds (0: none). */
  warmup: number;
}

/** Defaults of every suite, overridable through BENCH_DURATION, BENCH_CONNECTIONS, BENCH_WARMUP. */
export function loadSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): LoadSettings {
  const int = (name: string, fallback: number, min: number) => {
    const raw = env[name]?.trim();
    if (!raw) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be an integer ≥ ${min} (got "${raw}")`);
    return n;
  };
  return {
    duration: int('BENCH_DURATION', 20, 1),
    connections: int('BENCH_CONNECTIONS', 64, 1),
    warmup: int('BENCH_WARMUP', 3, 0),
  };
}

export interface LoadTarget {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Processes whose CPU use is reported (the server under test…), listed at start and end of the run. */
  cpu?: Record<string, () => number[]>;
}

export interface LoadResult {
  /** Mean of the per-second request counts. */
  rps: number;
  rpsStddev: number;
  /** milliseconds (autocannon records whole milliseconds) */
  p50: number;
  p99: number;
  max: number;
  requests: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodes: Record<string, number>;
  /** Mean response size including headers. */
  bytesPerResponse: number;
  /** CPU use during the measured run, % of one core, per `LoadTarget.cpu` key, plus `load generator` and `other processes` (the rest of the machine: interference). */
  cpu: Record<string, number | undefined>;
}

function once(target: LoadTarget, connections: number, duration: number): PromiseLike<autocannon.Result> {
  return autocannon({
    url: target.url,
    method: target.method ?? 'GET',
    headers: target.headers ?? {},
    ...(target.body !== undefined ? { body: target.body } : {}),
    connections,
    duration,
  });
}

/** Warm-up (discarded), then the measured run, with the same connections. */
export async function runLoad(target: LoadTarget, settings: LoadSettings): Promise<LoadResult> {
  if (settings.warmup > 0) await once(target, settings.connections, settings.warmup);
  const meters = Object.entries(target.cpu ?? {}).map(([name, pids]) => [name, meterCpu(pids)] as const);
  const own = meterOwnCpu();
  const machine = meterMachineCpu();
  const r = await once(target, settings.connections, settings.duration);
  const cpu: Record<string, number | undefined> = {};
  for (const [name, meter] of meters) cpu[name] = meter.stop();
  cpu['load generator'] = own.stop();
  const whole = machine.stop();
  const ours = Object.values(cpu).reduce<number>((a, b) => a + (b ?? 0), 0);
  cpu['other processes'] = whole === undefined ? undefined : Math.max(0, whole - ours);
  return {
    rps: r.requests.average,
    rpsStddev: r.requests.stddev,
    p50: r.latency.p50,
    p99: r.latency.p99,
    max: r.latency.max,
    requests: r.requests.total,
    errors: r.errors,
    timeouts: r.timeouts,
    non2xx: r.non2xx,
    statusCodes: Object.fromEntries(Object.entries(r.statusCodeStats).map(([code, s]) => [code, s.count])),
    bytesPerResponse: r.requests.total > 0 ? r.throughput.total / r.requests.total : 0,
    cpu,
  };
}
