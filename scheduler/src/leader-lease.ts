import type { Clock } from '@orloj/common/core';
import type { Logger } from '@orloj/common/logging';
import type { Store } from '@orloj/common/store';

export const LEADER_LEASE = 'scheduler-leader';

/** The lease holder of a replica: its SCHEDULER_ID and a suffix new for every process (`<id>/<uuid>`). */
export function leaseHolder(replicaId: string, instance: string): string {
  return `${replicaId}/${instance}`;
}

/** The SCHEDULER_ID of a lease holder (what leaseHolder() was given). */
export function replicaOfHolder(holder: string): string {
  const slash = holder.lastIndexOf('/');
  return slash < 0 ? holder : holder.slice(0, slash);
}

/**
 * Leader election through a lease row in the store: whoever holds the
 * unexpired lease leads; the holder renews it on every tick; a crashed
 * leader's lease expires and another replica takes over with a higher fencing
 * token. Everything the leader writes is also guarded by the rows themselves
 * (unique slots, conditional transitions), so a brief overlap of two leaders
 * cannot create duplicates.
 */
export class LeaderLease {
  private token: number | undefined;

  constructor(
    private readonly deps: { store: Store; clock: Clock; logger: Logger; holder: string; ttlMs: number },
  ) {}

  get fencingToken(): number | undefined {
    return this.token;
  }

  /** Takes or renews the lease; true while this replica leads. */
  async renew(): Promise<boolean> {
    const { store, clock, holder, ttlMs, logger } = this.deps;
    let lease;
    try {
      lease = await store.leases.acquire(LEADER_LEASE, holder, clock.now(), ttlMs);
    } catch (err) {
      logger.warn({ err }, 'could not renew the leader lease; acting as follower');
      lease = undefined;
    }
    const was = this.token;
    this.token = lease?.fencingToken;
    if (was === undefined && this.token !== undefined) logger.info({ fencingToken: this.token }, 'became the scheduler leader');
    if (was !== undefined && this.token === undefined) logger.warn('lost the scheduler leadership');
    return this.token !== undefined;
  }

  async release(): Promise<void> {
    if (this.token === undefined) return;
    this.token = undefined;
    await this.deps.store.leases.release(LEADER_LEASE, this.deps.holder).catch(() => undefined);
  }
}
