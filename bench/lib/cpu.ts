import fs from 'node:fs';

/**
 * CPU time of other processes, from /proc (Linux; elsewhere every reading is
 * undefined and the reports say "n/a"). Used to show where the 2 cores went
 * during a run: the server under test, PostgreSQL's backends, the load generator.
 */
const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ; 100 on every mainstream Linux build

/** user + system CPU seconds of one process, or undefined when unreadable. */
function cpuSecondsOf(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name (which may contain spaces).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** Pids whose command name (/proc/<pid>/comm) is `name`. */
export function pidsNamed(name: string): number[] {
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (fs.readFileSync(`/proc/${e}/comm`, 'utf8').trim() === name) out.push(Number(e));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

export interface CpuMeter {
  /** CPU use since start() as a percentage of one core (200 % = both of 2 cores busy), or undefined. */
  stop(): number | undefined;
}

/**
 * Starts measuring the summed CPU time of `pids()` (re-listed at stop, so
 * processes born during the run, e.g. new PostgreSQL backends, count from 0).
 */
export function meterCpu(pids: () => number[]): CpuMeter {
  const started = performance.now();
  const before = new Map<number, number>();
  for (const pid of pids()) {
    const s = cpuSecondsOf(pid);
    if (s !== undefined) before.set(pid, s);
  }
  return {
    stop() {
      const elapsed = (performance.now() - started) / 1000;
      let used = 0;
      let seen = false;
      for (const pid of pids()) {
        const s = cpuSecondsOf(pid);
        if (s === undefined) continue;
        seen = true;
        used += s - (before.get(pid) ?? 0);
      }
      return seen && elapsed > 0 ? (used / elapsed) * 100 : undefined;
    },
  };
}

/** The same, for this process (the load generator). */
export function meterOwnCpu(): CpuMeter {
  const started = performance.now();
  const before = process.cpuUsage();
  return {
    stop() {
      const u = process.cpuUsage(before);
      const elapsed = (performance.now() - started) / 1000;
      return ((u.user + u.system) / 1e6 / elapsed) * 100;
    },
  };
}

/** Busy CPU ticks of the whole machine (all cores), from the first line of /proc/stat. */
function machineBusySeconds(): number | undefined {
  try {
    const first = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
    const [, ...ticks] = first.trim().split(/\s+/);
    const n = ticks.map(Number);
    const total = n.slice(0, 8).reduce((a, b) => a + b, 0); // user … steal (guest time is already in user)
    const idle = (n[3] ?? 0) + (n[4] ?? 0); // idle + iowait
    return (total - idle) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** CPU use of the whole machine, % of one core: what the measured processes do not account for is interference. */
export function meterMachineCpu(): CpuMeter {
  const started = performance.now();
  const before = machineBusySeconds();
  return {
    stop() {
      const after = machineBusySeconds();
      const elapsed = (performance.now() - started) / 1000;
      return before === undefined || after === undefined ? undefined : ((after - before) / elapsed) * 100;
    },
  };
}
