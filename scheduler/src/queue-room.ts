/** The fewest jobs the hand-out keeps waiting for the runners, whatever they took lately. */
export const QUEUE_FLOOR = 4;
/**
 * The hand-out keeps about this much (real time: the runners' work takes real
 * time whatever the scheduler's clock) of the runners' recent work waiting for
 * them. It must be longer than a job takes from the hand-out to its start being
 * applied (the bus, the runner, its job.started, a scheduler's batch): a job
 * still on that way counts as waiting, and with a shorter window the room would
 * shrink pass after pass on a busy fleet (CI: 5 jobs a second where 30 were due).
 */
const DEPTH_WINDOW_MS = 5_000;
/** A job handed out and not started for this long (real time: the runners' work takes real time whatever the scheduler's clock) no longer holds room: it is stuck, not waiting for a slot. */
const STUCK_AFTER_MS = 60_000;

/**
 * How many more jobs the leader may hand out now (docs/adr/0014-work-conserving-fair-hand-out.md).
 *
 * The queue is kept about five seconds deep: as many of the jobs this leader
 * handed out may wait unstarted as the runners started in the last five seconds,
 * and at least `floor`. A runner that frees a slot finds the next job waiting
 * (no slot idles while work waits), yet nothing queues far ahead of the
 * runners, so the order in which users' jobs run stays the hand-out's fair
 * choice rather than the order of a long queue. It needs nothing from the
 * runners but the job states: a runner that dies takes no room with it (its
 * jobs are RUNNING, not waiting, and its unacknowledged messages go back to
 * the queue), and a job that waits longer than STUCK_AFTER_MS stops holding
 * room. Jobs handed out by others (a previous leader, retries) are not
 * counted: at worst the queue is a little deeper for a while.
 */
export class QueueRoom {
  /** Jobs this leader handed out, not yet seen started: id → when (real time: the runners' work takes real time whatever the scheduler's clock). */
  private readonly waiting = new Map<string, number>();
  private readonly started: { at: number; n: number }[] = [];

  constructor(
    /** Of the ids given, those still QUEUED. */
    private readonly stillQueued: (ids: readonly string[]) => Promise<ReadonlySet<string>>,
    private readonly now: () => number,
    private readonly floor = QUEUE_FLOOR,
  ) {}

  /** The room at this pass. */
  async room(): Promise<number> {
    const at = this.now();
    const queued = this.waiting.size === 0 ? new Set<string>() : await this.stillQueued([...this.waiting.keys()]);
    let n = 0;
    for (const [id, since] of this.waiting) {
      if (queued.has(id) && at - since < STUCK_AFTER_MS) continue;
      this.waiting.delete(id);
      if (!queued.has(id)) n += 1;
    }
    if (n > 0) this.started.push({ at, n });
    while (this.started.length > 0 && at - this.started[0]!.at > DEPTH_WINDOW_MS) this.started.shift();
    const depth = Math.max(this.floor, this.started.reduce((sum, s) => sum + s.n, 0));
    return depth - this.waiting.size;
  }

  /** This pass moved these jobs to QUEUED. */
  handedOut(ids: readonly string[]): void {
    const at = this.now();
    for (const id of ids) this.waiting.set(id, at);
  }
}
