/** The settings of the api's live log tails (docs/logs.md). */
import { SETTINGS } from '@orloj/common/config';

export interface LiveTailSettings {
  /** How often a tail reads the store for new lines while no bus feeds it. */
  pollMs: number;
  /**
   * While the bus feeds the tails, how often the store is checked for lines
   * the broadcasts missed: one read of the attempt's line count for all the
   * job's tails here, and a store read by those tails it shows behind.
   */
  busPollMs: number;
  /** How often the job's status is read (once for all its tails in this process) to send `end`. */
  statusMs: number;
  /** Comment lines that keep proxies and clients from timing the stream out. */
  keepAliveMs: number;
  /** Concurrent streams per client address; 0 = unlimited. */
  maxStreamsPerClient: number;
  /** Concurrent streams per user, from any address (LIVE_TAIL_MAX_STREAMS_PER_USER); 0 = unlimited. */
  maxStreamsPerUser: number;
  /** Rows per store query. */
  batchSize: number;
  /**
   * How long a tail waits for a missing sequence_num (stored out of order by
   * concurrent log-ingest consumers) before it moves past it.
   */
  holeGraceMs: number;
  /** Lines a tail holds from the bus while the client is slow; beyond it, they are read from the store later. */
  maxPending: number;
  /**
   * How long a stream stays open after `end`, with keep-alive comments, for
   * the client to close it (LIVE_TAIL_HOLD_AFTER_END; at most 60 s).
   */
  holdAfterEndMs: number;
}

export const DEFAULT_LIVE_TAIL: LiveTailSettings = {
  pollMs: 250,
  busPollMs: 2_000,
  statusMs: 1_000,
  keepAliveMs: 15_000,
  maxStreamsPerClient: 5,
  maxStreamsPerUser: SETTINGS.LIVE_TAIL_MAX_STREAMS_PER_USER.default,
  batchSize: 1_000,
  holeGraceMs: 2_000,
  maxPending: 10_000,
  holdAfterEndMs: SETTINGS.LIVE_TAIL_HOLD_AFTER_END.default,
};
