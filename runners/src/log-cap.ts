/**
 * The per-job log cap (JOB_LOG_MAX_LINES / JOB_LOG_MAX_MB, docs/security.md),
 * enforced where the lines are captured: in the runner, before they are
 * buffered or sent. Past the cap nothing more of the job is held in memory,
 * published, stored, indexed or broadcast, however slow the path behind is;
 * the container's output is still read (so it does not block) and counted.
 */
export class LogCap {
  private lines = 0;
  private bytes = 0;
  private reached = false;
  /** Lines the container printed, kept or not. */
  printed = 0;

  constructor(
    readonly maxLines: number,
    readonly maxBytes: number,
  ) {}

  /** Whether the cap was reached: the log ends with the marker line. */
  get truncated(): boolean {
    return this.reached;
  }

  /**
   * What to store for one printed line: the line itself while within the cap,
   * then the marker line once (in its place), then nothing.
   */
  admit(message: string): 'keep' | 'marker' | 'drop' {
    this.printed += 1;
    if (this.reached) return 'drop';
    const size = Buffer.byteLength(message, 'utf8');
    // The line that would pass the cap is replaced by the marker: at most maxLines lines, then the marker.
    if (this.lines >= this.maxLines || this.bytes + size > this.maxBytes) {
      this.reached = true;
      return 'marker';
    }
    this.lines += 1;
    this.bytes += size;
    return 'keep';
  }

  marker(): string {
    const mib = this.maxBytes / (1024 * 1024);
    return `[orloj] log limit reached (${this.maxLines} lines or ${Number.isInteger(mib) ? mib : mib.toFixed(2)} MiB per job): the rest of this job's output is counted but not stored.`;
  }
}
