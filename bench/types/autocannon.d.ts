// The subset of autocannon's programmatic API the benchmarks use (the package ships no types).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Options {
      url: string;
      connections?: number;
      /** seconds */
      duration?: number;
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      pipelining?: number;
      /** seconds */
      timeout?: number;
      title?: string;
    }

    /** Percentiles are keyed p50, p90, p97_5, p99, p99_9 … */
    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total: number;
      p50: number;
      p90: number;
      p97_5: number;
      p99: number;
      p99_9: number;
      [percentile: `p${string}`]: number;
    }

    interface Result {
      url: string;
      connections: number;
      duration: number;
      start: Date;
      finish: Date;
      errors: number;
      timeouts: number;
      mismatches: number;
      non2xx: number;
      resets: number;
      '2xx': number;
      statusCodeStats: Record<string, { count: number }>;
      /** milliseconds */
      latency: Histogram & { totalCount: number };
      /** per-second samples */
      requests: Histogram & { sent: number };
      /** bytes per second samples */
      throughput: Histogram;
    }

    interface Instance extends EventEmitter, PromiseLike<Result> {}
  }

  function autocannon(options: autocannon.Options): autocannon.Instance;
  export default autocannon;
}
