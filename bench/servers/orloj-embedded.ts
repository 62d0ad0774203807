// The whole embedded orloj in one process, as `orloj start` runs it: api +
// scheduler + runners over the DATABASE_URL and BUS_URL the parent passes
// (startOrloj, the composition root). Besides, it reports its own resource use
// over IPC: CPU time, RSS (current and peak), event-loop utilisation and delay
// (and, like every bench child, a CPU profile on request). BENCH_ROLES
// (comma-separated) replaces the default roles api,scheduler,runners (the log
// suites add log-ingest); `storedLines` reads the store through a connection
// of its own. BENCH_ROLLUPS=off skips the reliability rollup write of each
// finished run (RollupsRepo.addMany), for the rollup-cost suite's comparison: a
// bench-only switch, not a setting of orloj.
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { openDatabase, RollupsRepo, type DatabaseHandle } from '@orloj/common/store';
import { parseRoles, startOrloj } from '@orloj/server';
import { serveParent } from '../lib/child.js';
import type { ProcessUsage } from '../lib/embedded.js';

if (process.env.BENCH_ROLLUPS === 'off') RollupsRepo.prototype.addMany = () => Promise.resolve();
const running = await startOrloj({ roles: parseRoles(process.env.BENCH_ROLES?.trim() || 'api,scheduler,runners'), env: process.env });
let reader: DatabaseHandle | undefined;
const delay = monitorEventLoopDelay({ resolution: 10 });
delay.enable();

serveParent(
  running.port ?? 0,
  {
    async usage(): Promise<ProcessUsage> {
      const cpu = process.cpuUsage();
      const mem = process.memoryUsage();
      const elu = performance.eventLoopUtilization();
      const reading: ProcessUsage = {
        at: Date.now(),
        cpuUser: cpu.user,
        cpuSystem: cpu.system,
        rss: mem.rss,
        maxRss: process.resourceUsage().maxRSS * 1024,
        heapUsed: mem.heapUsed,
        eluIdle: elu.idle,
        eluActive: elu.active,
        delayP50: delay.percentile(50) / 1e6,
        delayP99: delay.percentile(99) / 1e6,
        delayMax: delay.max / 1e6,
      };
      delay.reset();
      return reading;
    },
    /**
     * The job's job_log_counts.lines (one small row, what the bench polls)
     * and, with `full`, its lines in job_logs counted row by row and the
     * runner's timestamp of its first line (all attempts), read once at the end.
     */
    async storedLines(arg: { jobId: string; full?: boolean }) {
      reader ??= openDatabase(process.env.DATABASE_URL ?? '', { poolSize: 1, upkeep: false });
      const counted = sql<number | string | null>`(select sum(lines) from job_log_counts where job_id = ${arg.jobId})`;
      const { rows } = arg.full
        ? await sql<{ stored: number | string; counted: number | string | null; first: number | string | null }>`select
            (select count(*) from job_logs where job_id = ${arg.jobId}) as stored, ${counted} as counted,
            (select min("timestamp") from job_logs where job_id = ${arg.jobId}) as first`.execute(reader.db)
        : await sql<{ stored: null; counted: number | string | null; first: null }>`select null as stored, ${counted} as counted, null as first`.execute(reader.db);
      const r = rows[0];
      const stored = r?.stored === null || r?.stored === undefined ? {} : { stored: Number(r.stored) };
      return { counted: Number(r?.counted ?? 0), ...stored, ...(r?.first === null || r?.first === undefined ? {} : { first: Number(r.first) }) };
    },
  },
  async () => {
    await running.stop();
    await reader?.close();
  },
);
