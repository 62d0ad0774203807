import { api, attemptOfEntry, call, eventsUrl, rawLogUrl, type LogEntry, type LogPage, type LogRange } from '../api/client';

export type LogStream = 'stdout' | 'stderr';
export interface LogFilters {
  q?: string;
  stream?: LogStream;
}

export interface TailHandlers {
  onLog: (entry: LogEntry) => void;
  /** The job moved on to a new attempt (a retry): the lines that follow are its own, from line 0. */
  onAttempt?: (attempt: number) => void;
  /** The job reached a terminal state and every line was sent. */
  onEnd: () => void;
  /** The api refused the stream (its message), e.g. logs not kept. */
  onError: (message: string) => void;
}

/** Where the log viewer gets lines from; the api in the app, a fake in tests. */
export interface LogSource {
  page(filters: LogFilters, cursor: string): Promise<LogPage>;
  /** `limit` lines from sequence_num `from`, oldest first, and how many are stored. */
  lines(from: number, limit: number): Promise<LogRange>;
  /**
   * Follows the job's log from the first line of its current attempt, and on
   * into each new attempt; `attempt` is the current one as the caller knows it
   * (undefined: not known yet). Returns the way to stop.
   */
  tail(attempt: number | undefined, handlers: TailHandlers): () => void;
  rawUrl(format: 'txt' | 'json' | 'jsonl', filters: LogFilters): string;
}

const REOPEN_MS = 3_000;

/**
 * The api's log of a job: its current attempt's, or `attempt`'s (an attempt
 * given up, read by position and downloaded only: search covers the current one).
 */
export function apiLogSource(workflowId: string, jobId: string, attempt?: number): LogSource {
  const path = { workflow_id: workflowId, job_id: jobId };
  return {
    page(filters, cursor) {
      const c = cursor ? { cursor } : {};
      if (filters.q || filters.stream) {
        return call(api.GET('/workflows/{workflow_id}/jobs/{job_id}/logs/search', { params: { path, query: { ...c, q: filters.q || undefined, stream: filters.stream } } }));
      }
      return call(api.GET('/workflows/{workflow_id}/jobs/{job_id}/logs', { params: { path, query: c } }));
    },
    lines: (from, limit) => call(api.GET('/workflows/{workflow_id}/jobs/{job_id}/logs/lines', { params: { path, query: { from, limit, attempt } } })),
    rawUrl: (format, filters) => rawLogUrl(workflowId, jobId, format, filters, attempt),
    tail(current, handlers) {
      let last: number | undefined;
      let followed = current;
      let source: EventSource | undefined;
      let timer: ReturnType<typeof setTimeout> | undefined;
      let stopped = false;
      const stop = () => {
        stopped = true;
        clearTimeout(timer);
        source?.close();
      };
      const open = () => {
        // A dropped connection is resumed by the browser with Last-Event-ID;
        // one it gave up on (the server refused it, e.g. 429) is reopened here
        // from the last line seen, so nothing is missed or shown twice.
        const es = new EventSource(eventsUrl(workflowId, jobId, last, followed));
        source = es;
        es.addEventListener('log', (e) => {
          const entry = JSON.parse((e as MessageEvent<string>).data) as LogEntry;
          const attempt = attemptOfEntry(entry);
          const moved = followed !== undefined && attempt !== followed;
          followed = attempt;
          last = entry.sequence_num;
          if (moved) handlers.onAttempt?.(attempt);
          handlers.onLog(entry);
          if (moved) {
            // Reopened on the new attempt, so a later reconnect's Last-Event-ID is read as this attempt's position.
            es.close();
            open();
          }
        });
        es.addEventListener('end', () => {
          stop();
          handlers.onEnd();
        });
        es.addEventListener('error', (e) => {
          if (e instanceof MessageEvent && typeof e.data === 'string') {
            // The api's own `error` event: a problem document, then it closes.
            let message = 'The live log could not be opened.';
            try {
              message = (JSON.parse(e.data) as { detail?: string }).detail ?? message;
            } catch {
              // keep the generic message
            }
            stop();
            handlers.onError(message);
          } else if (es.readyState === EventSource.CLOSED && !stopped) {
            timer = setTimeout(open, REOPEN_MS);
          }
        });
      };
      open();
      return stop;
    },
  };
}
