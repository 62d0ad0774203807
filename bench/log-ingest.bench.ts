import pg from 'pg';
import { DISTRIBUTED_ROLES, startDistributedOrloj } from './lib/distributed.js';
import { startEmbeddedOrloj } from './lib/embedded.js';
import { api, createContainerWorkflow, IMAGE, podmanVersion, runtimeOrSkipped, POLL_MS, scheduleJob, until } from './lib/container.js';
import { meterCpu, meterMachineCpu, pidsNamed } from './lib/cpu.js';
import { createBenchDatabase, registerUser, type Engine } from './lib/orloj.js';
import { redactUrl } from './lib/postgres.js';
import { envInt, fmt, ms, summarize } from './lib/stats.js';
import type { BenchSuite, SuiteContext, SuiteReport } from './lib/suite.js';
import { codeVersion } from './lib/versions.js';

const TARGET_LINES_PER_S = 50_000;
const DEFAULT_AMQP = 'amqp://guest:guest@127.0.0.1:5672';
/** What every line says after its number: 96 bytes, an ordinary application log line. */
const SUFFIX = ' INFO worker-3 processed request method=GET path=/api/v1/items/4711 status=200 in 12ms';

interface Settings {
  lines: number;
  runs: number;
  postgres: boolean;
  /** Also the roles in separate processes on PostgreSQL + RabbitMQ. */
  distributed: boolean;
  amqpUrl: string;
}

type Topology = 'embedded' | 'same-process' | 'distributed';

/** What measure() needs of orloj, however its roles are laid out. */
/** A job's lines as the bench reads them: `stored` and `first` only on a full read. */
interface StoredLines {
  counted: number;
  stored?: number;
  first?: number;
}

interface Under {
  url: string;
  /** The processes whose CPU counts as orloj's. */
  pids(): number[];
  registerUser(): Promise<{ cookie: string }>;
  storedLines(jobId: string, full: boolean): Promise<StoredLines>;
  stop(): Promise<void>;
}

function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): Settings {
  return {
    lines: envInt('BENCH_INGEST_LINES', 200_000, 1),
    runs: envInt('BENCH_INGEST_RUNS', 3, 1),
    postgres: env.BENCH_INGEST_POSTGRES?.trim() !== '0',
    distributed: env.BENCH_INGEST_DISTRIBUTED?.trim() !== '0',
    amqpUrl: env.BENCH_AMQP_URL?.trim() || DEFAULT_AMQP,
  };
}

/** The container runtime's processes: podman (its API service), conmon, and the container's seq and sed. */
const runtimePids = (): number[] => ['podman', 'conmon', 'seq', 'sed'].flatMap((name) => pidsNamed(name));

/** The container's command: N numbered lines as fast as busybox can print them. */
const command = (lines: number): string[] => ['sh', '-c', `seq 1 ${lines} | sed 's|$|${SUFFIX}|'`];

interface Run {
  /** job started_at (runner) → every line in job_logs, ms */
  ms: number;
  /** started_at → finished (container exit, every line published), ms */
  containerMs: number;
  linesPerS: number;
  /** From the first line (runner's timestamp) to all stored: the pipeline without the container's start. */
  pipelineLinesPerS: number;
  orlojCpu: number | undefined;
  /** The split of orlojCpu on PostgreSQL + RabbitMQ: the orloj process, postgres (every backend), beam.smp. */
  split?: { orloj: number | undefined; postgres: number | undefined; broker: number | undefined };
  /** podman's API service, conmon and the container's own processes */
  runtimeCpu: number | undefined;
  otherCpu: number | undefined;
}

interface Target {
  label: string;
  runs: Run[];
  failure?: string;
  details?: string;
}

const LABELS: Record<Topology, string> = {
  embedded: 'SQLite + BUS_URL=memory: (embedded default)',
  'same-process': 'PostgreSQL + RabbitMQ',
  distributed: 'PostgreSQL + RabbitMQ, roles in separate processes',
};

/**
 * A job's line count (job_log_counts, one small row, what the poll reads) and,
 * with `full`, its stored lines counted row by row and the first line's
 * timestamp (read once, at the end: counting 200,000 rows every poll cost the
 * database more than the ingest it measures). Through a connection of the
 * parent's own (the distributed roles answer no such call).
 */
async function pgStoredLines(client: pg.Client, jobId: string, full: boolean): Promise<StoredLines> {
  const { rows } = await client.query<{ stored: string | null; counted: string | null; first: string | null }>(
    full
      ? `select (select count(*) from job_logs where job_id = $1) as stored,
                (select sum(lines) from job_log_counts where job_id = $1) as counted,
                (select min("timestamp") from job_logs where job_id = $1) as first`
      : 'select null as stored, (select sum(lines) from job_log_counts where job_id = $1) as counted, null as first',
    [jobId],
  );
  const r = rows[0]!;
  return { counted: Number(r.counted ?? 0), ...(r.stored === null ? {} : { stored: Number(r.stored) }), ...(r.first === null ? {} : { first: Number(r.first) }) };
}

async function startUnder(topology: Topology, databaseUrl: string, s: Settings, dockerHost: string): Promise<Under> {
  const common = { DOCKER_HOST: dockerHost, CONTAINER_REGISTRIES: 'docker.io,localhost', JOB_LOG_MAX_LINES: '100000000', JOB_LOG_MAX_MB: '1048576' };
  if (topology !== 'distributed') {
    const o = await startEmbeddedOrloj(databaseUrl, {
      ...common,
      BENCH_ROLES: 'api,scheduler,runners,log-ingest',
      ...(topology === 'same-process' ? { BUS_URL: s.amqpUrl } : {}),
    });
    return {
      url: o.url,
      pids: () => [o.pid],
      registerUser: () => o.registerUser(),
      storedLines: (jobId, full) => o.call<StoredLines>('storedLines', { jobId, full }),
      stop: () => o.stop(),
    };
  }
  const o = await startDistributedOrloj(databaseUrl, s.amqpUrl, common);
  const reader = new pg.Client({ connectionString: databaseUrl });
  await reader.connect();
  return {
    url: o.url,
    pids: () => DISTRIBUTED_ROLES.map((r) => o.pids[r]),
    registerUser: () => registerUser(o.url),
    storedLines: (jobId, full) => pgStoredLines(reader, jobId, full),
    async stop() {
      await reader.end();
      await o.stop();
    },
  };
}

async function measure(ctx: SuiteContext, s: Settings, topology: Topology, dockerHost: string): Promise<Target> {
  const label = LABELS[topology];
  const engine: Engine = topology === 'embedded' ? 'sqlite' : 'postgres';
  const db = await createBenchDatabase(engine);
  let orloj: Under | undefined;
  try {
    orloj = await startUnder(topology, db.url, s, dockerHost);
    const { cookie } = await orloj.registerUser();
    const { id } = await createContainerWorkflow(orloj, cookie, 'bench log lines', { image: IMAGE, cmd: command(s.lines), timeout: '10m' }, { log_retention: true });
    const runs: Run[] = [];
    const under = orloj;
    const cpuPids: () => number[] = engine === 'postgres' ? () => [...under.pids(), ...pidsNamed('postgres'), ...pidsNamed('beam.smp')] : () => under.pids();
    for (let i = 0; i < s.runs; i++) {
      const orlojCpu = meterCpu(cpuPids);
      const parts = engine === 'postgres' ? { orloj: meterCpu(() => under.pids()), postgres: meterCpu(() => pidsNamed('postgres')), broker: meterCpu(() => pidsNamed('beam.smp')) } : undefined;
      const runtimeCpu = meterCpu(runtimePids);
      const machine = meterMachineCpu();
      const jobId = await scheduleJob(orloj, cookie, id);
      const read = (full: boolean) => under.storedLines(jobId, full);
      await until(() => read(false), (c) => c.counted >= s.lines, `${s.lines} stored lines of job ${jobId}`, 10 * 60_000);
      const storedAt = Date.now() - POLL_MS / 2; // the poll found it at most POLL_MS late
      const ours = orlojCpu.stop();
      const split = parts && { orloj: parts.orloj.stop(), postgres: parts.postgres.stop(), broker: parts.broker.stop() };
      const runtimeUsed = runtimeCpu.stop();
      const whole = machine.stop();
      const job = await until(
        () => api(orloj!, cookie, 'GET', `/workflows/${id}/jobs/${jobId}`).then((r) => r.json as { status: string; started_at?: string; completed_at?: string; status_reason_code?: string }),
        (j) => ['COMPLETED', 'FAILED', 'CANCELED'].includes(j.status),
        `job ${jobId}`,
        60_000,
      );
      if (job.status !== 'COMPLETED' || !job.started_at || !job.completed_at) throw new Error(`job ${jobId} ended ${job.status} (${job.status_reason_code ?? '?'})`);
      const started = Date.parse(job.started_at);
      const elapsed = storedAt - started;
      const final = await read(true);
      if (final.stored !== s.lines) throw new Error(`job ${jobId} stored ${final.stored} lines, expected ${s.lines}`);
      runs.push({
        ms: elapsed,
        containerMs: Date.parse(job.completed_at) - started,
        linesPerS: (s.lines / elapsed) * 1000,
        pipelineLinesPerS: (s.lines / Math.max(1, storedAt - (final.first ?? started))) * 1000,
        orlojCpu: ours,
        ...(split ? { split } : {}),
        runtimeCpu: runtimeUsed,
        otherCpu: whole === undefined ? undefined : Math.max(0, whole - (ours ?? 0) - (runtimeUsed ?? 0)),
      });
      const splitText = split ? `; CPU orloj ${pct(split.orloj)}, postgres ${pct(split.postgres)}, rabbitmq ${pct(split.broker)}` : '';
      ctx.log(`${label}: run ${i + 1}/${s.runs}: ${fmt(s.lines)} lines stored ${fmt(elapsed)} ms after the job started (${fmt((s.lines / elapsed) * 1000)} lines/s)${splitText}`);
    }
    return {
      label,
      runs,
      details: engine === 'sqlite' ? 'SQLite in a temp file' : `${db.where}; bus ${redactUrl(s.amqpUrl)}`,
    };
  } catch (err) {
    const failure = err instanceof Error ? err.message : String(err);
    ctx.log(`${label}: FAILED: ${failure}`);
    return { label, runs: [], failure };
  } finally {
    await orloj?.stop();
    await db.drop();
  }
}

const pct = (n: number | undefined) => (n === undefined ? 'n/a' : `${fmt(n)} %`);
const mean = (xs: Array<number | undefined>) => {
  const v = xs.filter((x): x is number => x !== undefined);
  return v.length ? v.reduce((a, b) => a + b, 0) / v.length : undefined;
};

export const logIngest: BenchSuite = {
  name: 'log-ingest',
  title: 'Job logs: ingest rate from one container, end to end',

  async run(ctx): Promise<SuiteReport> {
    const s = settingsFromEnv();
    const description = [
      `Lines per second from one container to the store: a CONTAINER workflow (log retention on) whose image \`${IMAGE}\` prints ${fmt(s.lines)} numbered lines of about 100 bytes as fast as it can (\`seq | sed\`), started as a manual job with \`POST /workflows/{id}/jobs/schedule\`.`,
      'The clock runs from the job\'s `started_at` (the runner took it) to the moment all lines are in `job_logs` (polled every 20 ms in the orloj process); it covers the container\'s output, the runner\'s capture and `BusLogSink` batches, the bus queue `logs`, and `LogIngester`\'s bulk inserts with the `job_log_counts` upsert (docs/logs.md).',
      'The embedded default is all roles in one process (api, scheduler, runners, log-ingest) over SQLite with `BUS_URL=memory:`; the second row is the same process over PostgreSQL and RabbitMQ; the third runs api, scheduler, runners, log-ingest and notifier as separate processes (`orloj start --roles <role>`, keys in a shared DATA_DIR) on PostgreSQL and RabbitMQ, and counts stored lines through a connection of the parent.',
    ].join(' ');
    const settings: Array<[string, string]> = [
      ['Code', codeVersion()],
      ['orloj', 'roles api, scheduler, runners, log-ingest in one child process (TypeScript sources via tsx), `NODE_ENV=production`, `LOG_LEVEL=warn`, `RUNNER_CONCURRENCY=4` (default), `CONTAINER_REGISTRIES=docker.io,localhost`, per-user and log caps out of the way, `DOCKER_HOST` = the podman service of `scripts/container-runtime.sh`; `BusLogSink` and `LogIngester` with their defaults'],
      ['Jobs', `${s.runs} jobs one after another, each printing ${fmt(s.lines)} lines (\`sh -c "seq 1 ${s.lines} | sed 's|$|…|'"\`)`],
      ['Overrides', 'BENCH_INGEST_LINES, BENCH_INGEST_RUNS, BENCH_INGEST_POSTGRES (0 skips the same-process PostgreSQL + RabbitMQ row), BENCH_INGEST_DISTRIBUTED (0 skips the separate-processes row), BENCH_DATABASE_URL, BENCH_AMQP_URL (default amqp://guest:guest@127.0.0.1:5672), ORLOJ_PODMAN_DIR'],
    ];
    const columns = ['Target', 'jobs', 'lines/s (median)', 'lines/s (min … max)', 'started → all stored, ms (median)', 'first line → all stored, lines/s (median)', 'started → container done, ms (median)', 'CPU orloj (+ db, broker)', 'CPU podman, conmon, container', 'CPU other processes'];
    const target = `Target: ≥ ${fmt(TARGET_LINES_PER_S)} lines/s end to end on the embedded default (SQLite + \`BUS_URL=memory:\`).`;

    const runtime = runtimeOrSkipped(ctx, { description, settings, columns, target: target });
    if (runtime.skipped) return runtime.skipped;
    const targets = [await measure(ctx, s, 'embedded', runtime.dockerHost)];
    if (s.postgres) targets.push(await measure(ctx, s, 'same-process', runtime.dockerHost));
    if (s.distributed) targets.push(await measure(ctx, s, 'distributed', runtime.dockerHost));

    const rows = targets.map((t) => {
      if (!t.runs.length) return [t.label, `not run: ${t.failure ?? '?'}`, '', '', '', '', '', '', '', ''];
      const rate = summarize(t.runs.map((r) => r.linesPerS));
      return [
        t.label,
        fmt(t.runs.length),
        fmt(rate.p50),
        `${fmt(Math.min(...t.runs.map((r) => r.linesPerS)))} … ${fmt(rate.max)}`,
        ms(summarize(t.runs.map((r) => r.ms)).p50),
        fmt(summarize(t.runs.map((r) => r.pipelineLinesPerS)).p50),
        ms(summarize(t.runs.map((r) => r.containerMs)).p50),
        pct(mean(t.runs.map((r) => r.orlojCpu))),
        pct(mean(t.runs.map((r) => r.runtimeCpu))),
        pct(mean(t.runs.map((r) => r.otherCpu))),
      ];
    });
    const embedded = targets[0]!;
    const median = embedded.runs.length ? summarize(embedded.runs.map((r) => r.linesPerS)).p50 : Number.NaN;
    const disturbed = targets.filter((t) => (mean(t.runs.map((r) => r.otherCpu)) ?? 0) > 25);
    return {
      description,
      settings,
      table: { columns, rows },
      verdict: [
        target,
        '',
        embedded.runs.length
          ? `- Embedded default: median ${fmt(median)} lines/s → **${median >= TARGET_LINES_PER_S ? 'met' : 'missed'}**`
          : '- Embedded default: **not measured** (see the row)',
        ...targets.slice(1).map((t) => (t.runs.length ? `- ${t.label} (no target of its own): median ${fmt(summarize(t.runs.map((r) => r.linesPerS)).p50)} lines/s` : `- ${t.label}: not measured`)),
      ],
      notes: [
        '- In the first two rows one process does everything (container capture, batching, the bus, inserts, counts), so the rate is what one orloj process sustains on this machine; in the third the runner and log-ingest have a process each. CPU is per process during the measured jobs, in % of one core ("+ db, broker": every postgres and beam.smp process, shared with anything else using them).',
        '- "first line → all stored" starts at the runner\'s timestamp of line 0 instead of the job\'s start, leaving out the container\'s creation and start: the rate of the log pipeline itself. The verdict uses the end-to-end rate.',
        '- "started → container done" is the job\'s `completed_at` − `started_at`: the runner reports the job only after every line is published, so it includes back-pressure from ingest; the lines are stored a moment later.',
        ...targets.filter((t) => t.details).map((t) => `- ${t.label}: ${t.details}.`),
        `- ${podmanVersion()}, runtime ${runtime.dockerHost}.`,
        ...(disturbed.length
          ? [`- **Disturbed**: other processes used ${disturbed.map((t) => `${pct(mean(t.runs.map((r) => r.otherCpu)))} of a core during ${t.label}`).join(', ')} of the 2 cores; the rates there are pessimistic.`]
          : []),
      ],
      valid: embedded.runs.length === s.runs,
    };
  },
};
