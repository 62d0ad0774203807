import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * Every Prometheus metric orloj exports (docs/operations.md describes each).
 * One instance per process, made by the composition root and handed to what
 * records into it: there is no global registry. Names follow Prometheus's
 * conventions (`orloj_` prefix, base units, `_total` counters); no label
 * takes unbounded values (no workflow, job or user ids).
 */
export class OrlojMetrics {
  readonly registry: Registry;
  readonly httpRequestDuration: Histogram<'method' | 'route' | 'status'>;
  readonly jobsFinished: Counter<'kind' | 'trigger' | 'status' | 'reason'>;
  readonly scheduleLag: Histogram<'kind'>;
  readonly busPublished: Counter<'queue'>;
  readonly busConsumed: Counter<'queue'>;
  readonly busRedelivered: Counter<'queue'>;
  readonly busDeadLettered: Counter<'queue'>;
  readonly busRefused: Counter<'queue' | 'reason'>;

  constructor(options: { defaultMetrics?: boolean; labels?: Record<string, string> } = {}) {
    this.registry = new Registry();
    if (options.labels) this.registry.setDefaultLabels(options.labels);
    // process_* and nodejs_* (CPU, memory, handles, GC and event-loop delay).
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 20 });
    const registers = [this.registry];
    this.httpRequestDuration = new Histogram({
      name: 'orloj_http_request_duration_seconds',
      help: 'HTTP requests the api answered, by method, route template and status.',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.jobsFinished = new Counter({
      name: 'orloj_jobs_finished_total',
      help: 'Jobs that reached a terminal state, counted once when the notifier applies their event.',
      labelNames: ['kind', 'trigger', 'status', 'reason'],
      registers,
    });
    this.scheduleLag = new Histogram({
      name: 'orloj_schedule_lag_seconds',
      help: 'Start minus due time of automatic jobs that started, observed when the job ends.',
      labelNames: ['kind'],
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800],
      registers,
    });
    this.busPublished = new Counter({ name: 'orloj_bus_messages_published_total', help: 'Messages published to a bus queue (confirmed by the broker).', labelNames: ['queue'], registers });
    this.busConsumed = new Counter({ name: 'orloj_bus_messages_consumed_total', help: 'Deliveries from a bus queue handled successfully (acked).', labelNames: ['queue'], registers });
    this.busRedelivered = new Counter({ name: 'orloj_bus_messages_redelivered_total', help: 'Deliveries from a bus queue that were redeliveries.', labelNames: ['queue'], registers });
    this.busDeadLettered = new Counter({
      name: 'orloj_bus_messages_dead_lettered_total',
      help: 'Messages whose handler failed on the last allowed delivery: the broker moves them to <queue>.dead.',
      labelNames: ['queue'],
      registers,
    });
    this.busRefused = new Counter({
      name: 'orloj_bus_messages_refused_total',
      help: 'Messages dropped because their envelope failed verification, by reason.',
      labelNames: ['queue', 'reason'],
      registers,
    });
  }

  /** A gauge read at scrape time; `read` may be async and may return labelled values. */
  gauge(name: string, help: string, read: () => Promise<number | undefined> | number | undefined): Gauge {
    const gauge: Gauge = new Gauge({
      name,
      help,
      registers: [this.registry],
      async collect() {
        const value = await read();
        gauge.reset();
        if (value !== undefined) gauge.set(value);
      },
    });
    return gauge;
  }

  /**
   * A gauge with one label read at scrape time. `read` returns the value per
   * label value, or undefined to export nothing (a standby scheduler).
   */
  labelledGauge<L extends string>(name: string, help: string, label: L, read: () => Promise<Record<string, number> | undefined>): Gauge<L> {
    const gauge: Gauge<L> = new Gauge({
      name,
      help,
      labelNames: [label],
      registers: [this.registry],
      async collect() {
        const values = await read();
        gauge.reset();
        for (const [key, value] of Object.entries(values ?? {})) gauge.set({ [label]: key } as Partial<Record<L, string>>, value);
      },
    });
    return gauge;
  }

  /** A counter kept elsewhere (a role's own tally since start), copied at scrape time. */
  counterFrom(name: string, help: string, read: () => number): Counter {
    const counter: Counter = new Counter({
      name,
      help,
      registers: [this.registry],
      collect() {
        counter.reset();
        counter.inc(read());
      },
    });
    return counter;
  }

  /** The exposition: Prometheus text format 0.0.4. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
