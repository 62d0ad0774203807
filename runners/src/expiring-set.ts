import type { Clock } from '@orloj/common/core';

/**
 * A set of strings that forgets each member `ttlMs` after it was (last)
 * added, and never holds more than `max` members (the oldest go first). The
 * runner remembers stopped job ids in one, so it stays bounded under any
 * number of stop messages.
 */
export class ExpiringSet {
  /** member → expiry (clock ms), in insertion order = expiry order (one TTL for all). */
  private readonly members = new Map<string, number>();

  constructor(private readonly options: { clock: Clock; ttlMs: number; max: number }) {}

  get size(): number {
    this.forgetExpired();
    return this.members.size;
  }

  add(member: string): void {
    this.forgetExpired();
    this.members.delete(member); // re-adding moves it to the end
    this.members.set(member, this.options.clock.now() + this.options.ttlMs);
    while (this.members.size > this.options.max) this.members.delete(this.members.keys().next().value as string);
  }

  has(member: string): boolean {
    this.forgetExpired();
    return this.members.has(member);
  }

  private forgetExpired(): void {
    const now = this.options.clock.now();
    for (const [member, expiresAt] of this.members) {
      if (expiresAt > now) return;
      this.members.delete(member);
    }
  }
}
