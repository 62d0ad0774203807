import { spawn } from 'node:child_process';
import path from 'node:path';
import { silentLogger } from '@orloj/common/logging';
import { ContainerExecutor } from '@orloj/runners';
import { api, createContainerWorkflow, IMAGE, podmanVersion, runtimeOrSkipped, POLL_MS, scheduleJob, until } from './lib/container.js';
import { startEmbeddedOrloj, type EmbeddedOrloj } from './lib/embedded.js';
import { createBenchDatabase } from './lib/orloj.js';
import { startScheduleDb, type JobRow } from './lib/schedule-db.js';
import { envInt, fmt, ms, sleep, summarize, type Summary } from './lib/stats.js';
import type { BenchSuite, SuiteContext, SuiteReport } from './lib/suite.js';
import { codeVersion } from './lib/versions.js';

/** Against `podman run --rm --network none` (orloj's own network mode), measured in the same run. */
const TARGET_P50_RATIO = 1.15;
const TARGET_P99_RATIO = 1.5;
const JOB_TIMEOUT_MS = 120_000;
/** Random pause before each orloj job, up to the default SCHEDULER_TICK. */
const JITTER_MS = 1_000;

interface Settings {
  jobs: number;
  warmup: number;
  tick: string | undefined;
}

function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): Settings {
  return {
    jobs: envInt('BENCH_CONTAINER_JOBS', 30, 1),
    warmup: envInt('BENCH_CONTAINER_WARMUP', 2, 0),
    tick: env.BENCH_SCHED_TICK?.trim() || undefined,
  };
}

/** Wall time of one CLI run, spawn to exit (ms); rejects on a non-zero exit. */
function timeCommand(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const elapsed = performance.now() - started;
      if (code === 0) resolve(elapsed);
      else reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${stderr.trim().slice(0, 300)}`));
    });
  });
}

interface Measured {
  orlojApi: number[];
  orlojDb: number[];
  bare: number[];
  bareNoNet: number[];
  /** The ContainerExecutor alone, in this process: image check + run, as the runner calls them. */
  executor: number[];
  /** Per runtime call and step of those executor runs (ms). */
  calls: Map<string, number[]>;
  rows: JobRow[];
  failures: string[];
  buildMs: number;
}

/**
 * One CONTAINER run by the executor alone, as the runner makes it (image
 * check, then run with the runner's labels and the default limits), without
 * queue, lease, log sink or store: what is left of an orloj job's time is
 * orloj's own.
 */
async function timeExecutor(executor: ContainerExecutor, round: number): Promise<number> {
  const started = performance.now();
  const image = await executor.ensureImage(IMAGE);
  if (!image.ok) throw new Error(`executor: image check failed: ${image.reason.code}`);
  const result = await executor.run(
    {
      jobId: `bench-${process.pid}-${round}`,
      image: IMAGE,
      cmd: ['true'],
      env: {},
      timeoutMs: JOB_TIMEOUT_MS,
      network: 'none',
      memoryMb: 512,
      cpus: 1,
      labels: { 'orloj.runner_id': 'bench', 'orloj.workflow_id': 'bench', 'orloj.attempt': '1' },
    },
    { onLine: () => undefined },
  );
  if (result.status !== 'COMPLETED') throw new Error(`executor run ended ${result.status}`);
  return performance.now() - started;
}

async function measure(ctx: SuiteContext, s: Settings, dockerHost: string, containersConf: string): Promise<Measured> {
  const db = await createBenchDatabase('sqlite');
  const podmanEnv = { ...process.env, CONTAINERS_CONF: containersConf };
  const out: Measured = { orlojApi: [], orlojDb: [], bare: [], bareNoNet: [], executor: [], calls: new Map(), rows: [], failures: [], buildMs: 0 };
  let recording = false;
  const executor = new ContainerExecutor({
    dockerHost,
    logger: silentLogger,
    onCall: (what, took) => {
      if (!recording) return;
      const list = out.calls.get(what) ?? [];
      list.push(took);
      out.calls.set(what, list);
    },
  });
  let orloj: EmbeddedOrloj | undefined;
  try {
    orloj = await startEmbeddedOrloj(db.url, { DOCKER_HOST: dockerHost, ...(s.tick ? { SCHEDULER_TICK: s.tick } : {}) });
    const { cookie } = await orloj.registerUser();
    const built = await createContainerWorkflow(orloj, cookie, 'bench true', { image: IMAGE, cmd: ['true'], timeout: '1m' });
    const id = built.id;
    out.buildMs = built.buildMs;
    ctx.log(`workflow built in ${fmt(out.buildMs)} ms; ${s.warmup} warm-up + ${s.jobs} rounds of (orloj job, podman run, podman run --network none, executor alone)`);

    const ids: string[] = [];
    let endProfile: (() => Promise<string | undefined>) | undefined;
    for (let i = 0; i < s.warmup + s.jobs; i++) {
      if (i === s.warmup) endProfile = await orloj.profile('containers');
      const counted = i >= s.warmup;
      // A user's request lands at any moment of the scheduler's tick: a random
      // pause keeps the rounds from locking onto its phase.
      await sleep(Math.random() * JITTER_MS);
      // orloj: POST …/jobs/schedule, then GET the job until it is done
      const started = performance.now();
      const jobId = await scheduleJob(orloj, cookie, id);
      const job = await until(
        () => api(orloj!, cookie, 'GET', `/workflows/${id}/jobs/${jobId}`).then((r) => r.json as { status: string; status_reason_code?: string }),
        (j) => ['COMPLETED', 'FAILED', 'CANCELED'].includes(j.status),
        `job ${jobId}`,
        JOB_TIMEOUT_MS,
      );
      const elapsed = performance.now() - started;
      if (job.status !== 'COMPLETED') out.failures.push(`orloj job ${jobId} ended ${job.status} (${job.status_reason_code ?? '?'})`);
      if (counted) {
        out.orlojApi.push(elapsed);
        ids.push(jobId);
      }
      // the same container with the podman CLI, as a user would start it by hand
      try {
        const bare = await timeCommand('podman', ['run', '--rm', IMAGE, 'true'], podmanEnv);
        const noNet = await timeCommand('podman', ['run', '--rm', '--network', 'none', IMAGE, 'true'], podmanEnv);
        if (counted) {
          out.bare.push(bare);
          out.bareNoNet.push(noNet);
        }
        recording = counted;
        const alone = await timeExecutor(executor, i);
        recording = false;
        if (counted) out.executor.push(alone);
      } catch (err) {
        out.failures.push(err instanceof Error ? err.message : String(err));
      }
      if (counted && (i - s.warmup + 1) % 10 === 0) ctx.log(`${i - s.warmup + 1} / ${s.jobs} rounds`);
    }
    const profileFile = await endProfile?.();
    if (profileFile) ctx.log(`CPU profile of the measured rounds in ${profileFile}`);
    await orloj.stop();
    orloj = undefined;
    const tool = await startScheduleDb(db.url);
    try {
      out.rows = await tool.jobRows(ids);
    } finally {
      await tool.stop();
    }
    for (const r of out.rows) if (r.completed_at !== null) out.orlojDb.push(r.completed_at - r.scheduled_at);
    return out;
  } finally {
    await orloj?.stop();
    await db.drop();
  }
}

function phaseLine(rows: JobRow[]): string {
  const step = (name: string, pick: (r: JobRow) => [number | null, number | null]) => {
    const v = summarize(
      rows.flatMap((r) => {
        const [a, b] = pick(r);
        return a === null || b === null ? [] : [b - a];
      }),
    );
    return `${name} ${ms(v.p50)} / ${ms(v.p99)}`;
  };
  return [
    '- Where an orloj job\'s time goes, p50 / p99 ms per step (from the jobs table):',
    step('request → scheduler tick that QUEUED it', (r) => [r.scheduled_at, r.queued_at]) + ';',
    step('that tick → started by the runner', (r) => [r.queued_at, r.started_at]) + ';',
    step('started → finished (image check, create, attach, start, output, exit, remove)', (r) => [r.started_at, r.completed_at]) + ';',
    step('finished → COMPLETED in the store', (r) => [r.completed_at, r.updated_at]) + '.',
  ].join(' ');
}

/** The executor-alone runs, p50 / p99 per runtime call and step. */
function callsLine(calls: Map<string, number[]>): string {
  const parts = [...calls.entries()].map(([what, values]) => {
    const v = summarize(values);
    return `${what} ${ms(v.p50)} / ${ms(v.p99)}${v.count === 0 ? '' : ` (${fmt(v.count)}×)`}`;
  });
  return `- The executor alone, p50 / p99 ms per runtime call or step (times called): ${parts.join('; ')}.`;
}

const row = (label: string, v: Summary, baseline: Summary | undefined): string[] => [
  label,
  fmt(v.count),
  ms(v.p50),
  ms(v.p90),
  ms(v.p99),
  ms(v.max),
  ms(v.mean),
  baseline ? `${fmt(v.p50 / baseline.p50, 2)}×` : 'n/a',
  baseline ? `${fmt(v.p99 / baseline.p99, 2)}×` : 'n/a',
];

export const containers: BenchSuite = {
  name: 'containers',
  title: 'CONTAINER jobs: end-to-end time of a job running `true`, against `podman run`',

  async run(ctx): Promise<SuiteReport> {
    const s = settingsFromEnv();
    const stateDir = process.env.ORLOJ_PODMAN_DIR?.trim() || '/var/tmp/orloj-podman';
    const containersConf = path.join(stateDir, 'containers.conf');
    const description = [
      `End-to-end time of a manual CONTAINER job on the embedded orloj (api + scheduler + runners in one child process, SQLite, \`BUS_URL=memory:\`, real clock): \`POST /workflows/{id}/jobs/schedule\` until \`GET /workflows/{id}/jobs/{job_id}\` answers COMPLETED (polled every ${POLL_MS} ms), for a workflow whose image \`${IMAGE}\` runs \`true\`.`,
      'Beside it, in the same run and interleaved round by round, the same container started with the podman CLI on the same runtime (podman with runc, `CONTAINERS_CONF` from `scripts/container-runtime.sh`): `podman run --rm` as is, and with `--network none` as orloj runs it; and the same run by the `ContainerExecutor` alone in the bench process (image check + run, the runner\'s labels and limits), which times each runtime call.',
    ].join(' ');
    const settings: Array<[string, string]> = [
      ['Code', codeVersion()],
      ['orloj', `all roles in one child process (TypeScript sources via tsx), \`NODE_ENV=production\`, \`SCHEDULER_TICK=${s.tick ?? '1s (default)'}\`, \`RUNNER_CONCURRENCY=4\` (default), \`LOG_LEVEL=warn\`, \`CONTAINER_REGISTRIES=docker.io,localhost\`, per-user and log caps out of the way, \`DOCKER_HOST\` = the podman service of \`scripts/container-runtime.sh\``],
      ['Jobs', `${s.jobs} measured rounds after ${s.warmup} warm-up rounds; each round: a random pause of 0-${JITTER_MS} ms (so requests land at any phase of the scheduler tick), one orloj job, one \`podman run --rm ${IMAGE} true\`, one with \`--network none\`, one by the executor alone; one at a time`],
      ['Overrides', 'BENCH_CONTAINER_JOBS, BENCH_CONTAINER_WARMUP, BENCH_SCHED_TICK (SCHEDULER_TICK), ORLOJ_PODMAN_DIR (state dir of the runtime script), BENCH_CPU_PROF (adds orloj-embedded-containers-<pid>.cpuprofile: the orloj process during the measured rounds)'],
    ];
    const columns = ['Target', 'runs', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'mean ms', 'p50 vs --network none', 'p99 vs --network none'];
    const target = `Target: an orloj CONTAINER job's p50 ≤ ${TARGET_P50_RATIO}× and p99 ≤ ${TARGET_P99_RATIO}× those of \`podman run --rm --network none\` (orloj's own network mode), same runtime, same run.`;

    const runtime = runtimeOrSkipped(ctx, { description, settings, columns, target });
    if (runtime.skipped) return runtime.skipped;
    const m = await measure(ctx, s, runtime.dockerHost, containersConf);
    const api = summarize(m.orlojApi);
    const dbTimes = summarize(m.orlojDb);
    const bare = summarize(m.bare);
    const noNet = summarize(m.bareNoNet);
    const executorAlone = summarize(m.executor);
    const baseline = noNet.count ? noNet : undefined;
    const p50Ratio = baseline ? api.p50 / baseline.p50 : Number.NaN;
    const p99Ratio = baseline ? api.p99 / baseline.p99 : Number.NaN;
    const p50Ok = Number.isFinite(p50Ratio) && p50Ratio <= TARGET_P50_RATIO;
    const p99Ok = Number.isFinite(p99Ratio) && p99Ratio <= TARGET_P99_RATIO;
    return {
      description,
      settings,
      table: {
        columns,
        rows: [
          row('orloj job: POST schedule → GET shows COMPLETED', api, baseline),
          row('orloj job: scheduled_at → completed_at (jobs table)', dbTimes, baseline),
          row('the executor alone: image check + run (no queue, lease or store)', executorAlone, baseline),
          row(`podman run --rm ${IMAGE} true`, bare, baseline),
          row(`podman run --rm --network none ${IMAGE} true`, noNet, baseline),
        ],
      },
      verdict: [
        target,
        '',
        `- p50: ${fmt(p50Ratio, 2)}× (${ms(api.p50)} ms against ${ms(noNet.p50)} ms) → **${p50Ok ? 'met' : 'missed'}**`,
        `- p99: ${fmt(p99Ratio, 2)}× (${ms(api.p99)} ms against ${ms(noNet.p99)} ms) → **${p99Ok ? 'met' : 'missed'}**`,
        `- against \`podman run --rm\` with podman's default network: p50 ${fmt(api.p50 / bare.p50, 2)}×`,
      ],
      notes: [
        phaseLine(m.rows),
        callsLine(m.calls),
        `- ${podmanVersion()}, runtime ${runtime.dockerHost}; the workflow's build (image check) took ${fmt(m.buildMs)} ms before the first job.`,
        '- orloj talks to the podman API service over its socket (dockerode): image inspect, create (no network, all capabilities dropped, no-new-privileges, memory, CPU and pids limits, labels), attach (podman initialises the container here), start, read the output until it ends, inspect for the exit code (`wait` runs beside it: podman answers it 200-300 ms after the exit), remove; the CLI runs podman in-process, with podman\'s default network unless `--network none`.',
        '- The api nudges the scheduler leader when it queues a manual job (`scheduler-wake` broadcast), so the job does not wait for the next `SCHEDULER_TICK`: that is the "request → scheduler tick" step above.',
        ...(m.failures.length ? [`- **Invalid run**: ${m.failures.slice(0, 5).join('; ')}${m.failures.length > 5 ? ` (+${m.failures.length - 5} more)` : ''}.`] : []),
      ],
      valid: m.failures.length === 0 && api.count === s.jobs && executorAlone.count === s.jobs,
    };
  },
};
