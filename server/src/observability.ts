import { QUEUES } from '@orloj/common/messages';
import { DEAD_LETTER_SUFFIX } from '@orloj/common/bus';
import type { InstrumentedBus, OrlojMetrics } from '@orloj/common/observability';
import type { Store } from '@orloj/common/store';
import type { Scheduler } from '@orloj/scheduler';
import type { BusLogSink, Runner } from '@orloj/runners';
import type { LogIngester } from '@orloj/log-ingest';
import type { ApiServer } from '@orloj/api';

/**
 * The metrics a process exports about its roles, read at scrape time from
 * the roles' own tallies and the store (docs/operations.md lists them all).
 * Each register* is called once per role in the process.
 */
export const roleMetrics = {
  common(metrics: OrlojMetrics, bus: InstrumentedBus): void {
    metrics.gauge('orloj_bus_connected', 'Whether the connection to the message broker is up (1) or down (0).', () => (bus.connected ? 1 : 0));
  },

  /**
   * The leader alone exports the store's job counts and the broker's queue
   * depths (so sum() across schedulers does not count them twice); every
   * replica exports whether it leads.
   */
  scheduler(metrics: OrlojMetrics, scheduler: Scheduler, store: Store, bus: InstrumentedBus): void {
    metrics.gauge('orloj_scheduler_leader', 'Whether this scheduler replica holds the leader lease (1) or stands by (0).', () => (scheduler.isLeader ? 1 : 0));
    metrics.counterFrom('orloj_schedule_skipped_slots_total', 'Schedule slots passed over without a job (the previous job was still open, or the leader fell behind by more than an interval).', () => scheduler.stats.slotsSkipped);
    metrics.counterFrom('orloj_scheduler_jobs_recovered_after_restart_total', 'Jobs handed out again because their message was known lost (the in-process bus restarted with the process).', () => scheduler.stats.jobsRecoveredAfterRestart);
    metrics.counterFrom('orloj_scheduler_jobs_refused_total', 'job.run messages a runner refused (back from the dead-letter queue) and the scheduler handed out again.', () => scheduler.stats.jobsRefused);
    metrics.labelledGauge('orloj_jobs', 'Open jobs by status, as the store holds them (exported by the scheduler leader).', 'status', async () =>
      scheduler.isLeader ? store.jobs.countByStatus(['PENDING', 'QUEUED', 'RUNNING']) : undefined,
    );
    const queues = Object.values(QUEUES).flatMap((q) => [q, q + DEAD_LETTER_SUFFIX]);
    metrics.labelledGauge('orloj_bus_queue_messages', 'Messages ready in each orloj queue on the broker (exported by the scheduler leader).', 'queue', async () => {
      if (!scheduler.isLeader) return undefined;
      const depths: Record<string, number> = {};
      for (const queue of queues) {
        const depth = await bus.queueDepth(queue);
        if (depth !== undefined) depths[queue] = depth;
      }
      return depths;
    });
  },

  runners(metrics: OrlojMetrics, runner: Runner, sink: BusLogSink | undefined): void {
    metrics.gauge('orloj_runner_jobs_running', 'Job attempts running in this runner process.', () => runner.metrics().running);
    metrics.gauge('orloj_runner_jobs_waiting', 'job.run messages held by this runner waiting for a free slot.', () => runner.metrics().waiting);
    metrics.counterFrom('orloj_log_lines_captured_total', 'Container log lines the runners captured.', () => runner.metrics().logLines);
    metrics.counterFrom('orloj_log_lines_dropped_total', 'Captured log lines given up on (the runner stopped before it could publish them).', () => sink?.metrics().abandonedLines ?? 0);
  },

  logIngest(metrics: OrlojMetrics, ingester: LogIngester): void {
    metrics.counterFrom('orloj_log_lines_stored_total', 'Log lines log-ingest newly stored.', () => ingester.metrics().stored);
  },

  notifier(metrics: OrlojMetrics, store: Store): void {
    metrics.gauge('orloj_notifier_backlog_events', 'Domain events written and not yet applied by the notifier.', () => store.outbox.pending());
  },

  api(metrics: OrlojMetrics, api: ApiServer): void {
    metrics.gauge('orloj_live_tail_subscribers', 'Open live log tails (event streams) on this api process.', () => api.liveTailSubscribers);
    metrics.counterFrom('orloj_http_connections_refused_total', 'Connections closed as soon as accepted because their client address had HTTP_MAX_CONNECTIONS_PER_CLIENT open.', () => api.connectionsRefused);
    metrics.gauge('orloj_http_heavy_requests_running', 'Heavy requests (workflow pages, log pages, searches, downloads) holding a place (HTTP_MAX_HEAVY_REQUESTS).', () => api.heavyRequests.running);
    metrics.gauge('orloj_http_heavy_requests_waiting', 'Heavy requests waiting for a place.', () => api.heavyRequests.waiting);
    metrics.counterFrom('orloj_http_heavy_requests_refused_total', 'Heavy requests answered 503 after waiting too long for a place.', () => api.heavyRequests.refused);
  },
};
