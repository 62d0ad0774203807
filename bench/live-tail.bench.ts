import http from 'node:http';
import { api, createContainerWorkflow, IMAGE, runtimeOrSkipped, scheduleJob, until } from './lib/container.js';
import { meterCpu, meterMachineCpu, meterOwnCpu } from './lib/cpu.js';
import { startEmbeddedOrloj, type EmbeddedOrloj } from './lib/embedded.js';
import { createBenchDatabase } from './lib/orloj.js';
import { envInt, fmt, ms, sleep, summarize, type Summary } from './lib/stats.js';
import type { BenchSuite, SuiteContext, SuiteReport } from './lib/suite.js';
import { codeVersion } from './lib/versions.js';

const TARGET_P99_MS = 100;
/** Subscribers connecting at the same time. */
const CONNECT_WAVE = 50;

interface Settings {
  subscribers: number;
  rate: number;
  lines: number;
  delay: number;
}

function settingsFromEnv(): Settings {
  return {
    subscribers: envInt('BENCH_TAIL_SUBSCRIBERS', 1_000, 1),
    rate: envInt('BENCH_TAIL_RATE', 20, 1),
    lines: envInt('BENCH_TAIL_LINES', 600, 1),
    delay: envInt('BENCH_TAIL_DELAY', 30, 1),
  };
}

/** The job's command: a pause (the subscribers connect meanwhile), then `lines` lines at about `rate` a second. */
function command(s: Settings): string[] {
  const pause = Math.round(1_000_000 / s.rate);
  return ['sh', '-c', `sleep ${s.delay}; i=0; while [ $i -lt ${s.lines} ]; do echo "live line $i of the tail benchmark"; i=$((i+1)); usleep ${pause}; done`];
}

/**
 * One SSE client of `GET …/events`: records, for every `log` event, the time
 * from the line's `timestamp` (when the runner read it) to its arrival here.
 */
class Subscriber {
  connectedAt: number | undefined;
  ended = false;
  error: string | undefined;
  readonly seen = new Set<number>();
  duplicates = 0;
  private buffer = '';
  private req: http.ClientRequest | undefined;

  constructor(private readonly onLatency: (sequenceNum: number, timestamp: number, latency: number) => void) {}

  open(url: string, cookie: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.req = http.get(url, { headers: { cookie, accept: 'text/event-stream' } }, (res) => {
        if (res.statusCode !== 200) {
          this.error = `status ${res.statusCode}`;
          res.resume();
          reject(new Error(`GET …/events answered ${res.statusCode}`));
          return;
        }
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          const now = Date.now();
          this.buffer += chunk;
          let at: number;
          while ((at = this.buffer.indexOf('\n\n')) !== -1) {
            const block = this.buffer.slice(0, at);
            this.buffer = this.buffer.slice(at + 2);
            this.onEvent(block, now);
            if (this.connectedAt !== undefined) resolve();
          }
        });
        res.on('end', () => {
          if (this.connectedAt === undefined) reject(new Error('the event stream ended before `connected`'));
        });
      });
      this.req.on('error', (err) => {
        this.error ??= err.message;
        reject(err);
      });
    });
  }

  private onEvent(block: string, now: number): void {
    let event = 'message';
    let data = '';
    for (const line of block.split('\n')) {
      if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data += line.slice(6);
    }
    if (event === 'connected') this.connectedAt ??= now;
    else if (event === 'end') this.ended = true;
    else if (event === 'error') this.error ??= data;
    else if (event === 'log') {
      const entry = JSON.parse(data) as { sequence_num: number; timestamp: string };
      if (this.seen.has(entry.sequence_num)) {
        this.duplicates++;
        return;
      }
      this.seen.add(entry.sequence_num);
      const ts = Date.parse(entry.timestamp);
      this.onLatency(entry.sequence_num, ts, now - ts);
    }
  }

  close(): void {
    this.req?.destroy();
  }
}

interface Measured {
  latency: Summary;
  /** Per line (measured deliveries only): its first delivery to any subscriber — the pipeline up to the fan-out … */
  first: Summary;
  /** … and from its first delivery to its last — the fan-out to every subscriber. */
  spread: Summary;
  /** Deliveries of lines printed before the last subscriber connected (replayed from the store for some): left out. */
  excluded: number;
  connectMs: number;
  emitSeconds: number;
  missing: number;
  duplicates: number;
  notEnded: number;
  errors: string[];
  orlojCpu: number | undefined;
  clientCpu: number | undefined;
  otherCpu: number | undefined;
}

async function measure(ctx: SuiteContext, s: Settings, dockerHost: string): Promise<Measured> {
  const db = await createBenchDatabase('sqlite');
  let orloj: EmbeddedOrloj | undefined;
  const subscribers: Subscriber[] = [];
  try {
    orloj = await startEmbeddedOrloj(db.url, { DOCKER_HOST: dockerHost, BENCH_ROLES: 'api,scheduler,runners,log-ingest' });
    const { cookie } = await orloj.registerUser();
    const { id } = await createContainerWorkflow(orloj, cookie, 'bench live tail', { image: IMAGE, cmd: command(s), timeout: '30m' }, { log_retention: true });
    const jobId = await scheduleJob(orloj, cookie, id);
    await until(
      () => api(orloj!, cookie, 'GET', `/workflows/${id}/jobs/${jobId}`).then((r) => r.json as { status: string }),
      (j) => j.status !== 'PENDING' && j.status !== 'QUEUED',
      `job ${jobId} to start`,
      120_000,
    );
    const latencies: number[] = [];
    let allConnectedAt = Number.POSITIVE_INFINITY;
    let excluded = 0;
    let firstTs = Number.POSITIVE_INFINITY;
    let lastTs = 0;
    const perLine = new Map<number, { first: number; last: number }>();
    const onLatency = (seq: number, ts: number, latency: number) => {
      firstTs = Math.min(firstTs, ts);
      lastTs = Math.max(lastTs, ts);
      if (ts < allConnectedAt) {
        excluded++;
        return;
      }
      latencies.push(latency);
      const line = perLine.get(seq);
      if (!line) perLine.set(seq, { first: latency, last: latency });
      else {
        line.first = Math.min(line.first, latency);
        line.last = Math.max(line.last, latency);
      }
    };
    const url = `${orloj.url}/workflows/${id}/jobs/${jobId}/events`;
    const connectStarted = performance.now();
    for (let i = 0; i < s.subscribers; i += CONNECT_WAVE) {
      const wave = Array.from({ length: Math.min(CONNECT_WAVE, s.subscribers - i) }, () => new Subscriber(onLatency));
      subscribers.push(...wave);
      await Promise.all(wave.map((sub) => sub.open(url, cookie)));
    }
    allConnectedAt = Date.now();
    const connectMs = performance.now() - connectStarted;
    ctx.log(`${s.subscribers} subscribers connected in ${fmt(connectMs)} ms; waiting for the job's lines`);
    if (connectMs > s.delay * 1000) ctx.log(`warning: connecting took longer than the job's pause of ${s.delay} s (BENCH_TAIL_DELAY); early lines are left out`);
    const endProfile = await orloj.profile('live-tail');
    const orlojCpu = meterCpu(() => [orloj!.pid]);
    const client = meterOwnCpu();
    const machine = meterMachineCpu();
    const deadline = Date.now() + (s.delay + (s.lines / s.rate) * 3 + 120) * 1000;
    while (subscribers.some((sub) => !sub.ended && !sub.error) && Date.now() < deadline) await sleep(200);
    const ours = orlojCpu.stop();
    const clientCpu = client.stop();
    const whole = machine.stop();
    const profileFile = await endProfile();
    if (profileFile) ctx.log(`CPU profile from the last connection to the last \`end\` in ${profileFile}`);
    const errors = [...new Set(subscribers.flatMap((sub) => (sub.error ? [sub.error] : [])))];
    const lines = [...perLine.values()];
    return {
      latency: summarize(latencies),
      first: summarize(lines.map((l) => l.first)),
      spread: summarize(lines.map((l) => l.last - l.first)),
      excluded,
      connectMs,
      emitSeconds: (lastTs - firstTs) / 1000,
      missing: subscribers.reduce((a, sub) => a + (s.lines - sub.seen.size), 0),
      duplicates: subscribers.reduce((a, sub) => a + sub.duplicates, 0),
      notEnded: subscribers.filter((sub) => !sub.ended).length,
      errors,
      orlojCpu: ours,
      clientCpu,
      otherCpu: whole === undefined ? undefined : Math.max(0, whole - (ours ?? 0) - clientCpu!),
    };
  } finally {
    for (const sub of subscribers) sub.close();
    await orloj?.stop();
    await db.drop();
  }
}

const pct = (n: number | undefined) => (n === undefined ? 'n/a' : `${fmt(n)} %`);

export const liveTail: BenchSuite = {
  name: 'live-tail',
  title: 'Job logs: live-tail delivery latency with many subscribers',

  async run(ctx): Promise<SuiteReport> {
    const s = settingsFromEnv();
    const description = [
      `Delivery latency of live log lines to ${fmt(s.subscribers)} SSE subscribers of one running job (\`GET /workflows/{wid}/jobs/{jid}/events\`, signed in) on the embedded orloj (api, scheduler, runners and log-ingest in one child process, SQLite, \`BUS_URL=memory:\`, rate limits off so the 5-streams-per-client limit is off too).`,
      `The job's container (\`${IMAGE}\`) pauses ${s.delay} s while the subscribers connect, then prints ${fmt(s.lines)} lines at about ${s.rate} a second.`,
      'A delivery\'s latency is its arrival at the subscriber minus the line\'s `timestamp` (when the runner read it from the container): runner batching (`BusLogSink`), the bus, the store write in log-ingest, the `live-logs` broadcast, the api\'s `LiveTailHub` fan-out and SSE. Every subscriber must get every line exactly once, then `end`.',
    ].join(' ');
    const settings: Array<[string, string]> = [
      ['Code', codeVersion()],
      ['orloj', 'roles api, scheduler, runners, log-ingest in one child process (TypeScript sources via tsx), `NODE_ENV=production`, `RATE_LIMIT_ENABLED=false`, `LOG_LEVEL=warn`, live-tail settings default, `DOCKER_HOST` = the podman service of `scripts/container-runtime.sh`'],
      ['Subscribers', `${fmt(s.subscribers)} node:http clients in the parent process, connected in waves of ${CONNECT_WAVE}, each waiting for \`connected\``],
      ['Lines', `${fmt(s.lines)} after a ${s.delay} s pause, \`usleep ${Math.round(1_000_000 / s.rate)}\` between them (nominal ${s.rate}/s)`],
      ['Overrides', 'BENCH_TAIL_SUBSCRIBERS, BENCH_TAIL_RATE (lines/s), BENCH_TAIL_LINES, BENCH_TAIL_DELAY (s), ORLOJ_PODMAN_DIR, BENCH_CPU_PROF (adds orloj-embedded-live-tail-<pid>.cpuprofile: the orloj process from the last connection to the last `end`)'],
    ];
    const columns = ['Target', 'deliveries', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'mean ms', 'missing / duplicate', 'no `end`'];
    const target = `Target: p99 delivery latency ≤ ${TARGET_P99_MS} ms with 1,000 subscribers.`;
    const runtime = runtimeOrSkipped(ctx, { description, settings, columns, target: target });
    if (runtime.skipped) return runtime.skipped;
    const m = await measure(ctx, s, runtime.dockerHost);
    const l = m.latency;
    const ok = l.p99 <= TARGET_P99_MS;
    const valid = m.missing === 0 && m.duplicates === 0 && m.notEnded === 0 && m.errors.length === 0;
    return {
      description,
      settings,
      table: {
        columns,
        rows: [[`${fmt(s.subscribers)} subscribers, one job`, fmt(l.count), ms(l.p50), ms(l.p90), ms(l.p99), ms(l.max), ms(l.mean), `${fmt(m.missing)} / ${fmt(m.duplicates)}`, fmt(m.notEnded)]],
      },
      verdict: [
        target,
        '',
        `- p99 ${ms(l.p99)} ms → **${ok ? 'met' : 'missed'}**${s.subscribers === 1_000 ? '' : ` (with ${fmt(s.subscribers)} subscribers, not 1,000)`}${valid ? '' : '; **invalid**: lines missing, duplicated, or streams without `end` (see the row)'}`,
      ],
      notes: [
        `- All on one machine: the container, the orloj process and the ${fmt(s.subscribers)} clients share the 2 cores, so the clients' own parsing delays what they record. CPU from the last connection to the last \`end\`: orloj ${pct(m.orlojCpu)}, the clients (parent process) ${pct(m.clientCpu)}, other processes ${pct(m.otherCpu)} (% of one core).`,
        `- The lines took ${fmt(m.emitSeconds, 1)} s to print (${fmt(s.lines / Math.max(m.emitSeconds, 0.001), 1)} lines/s; \`usleep\` and the shell loop add to the nominal pause); ${fmt(s.subscribers)} subscribers connected in ${fmt(m.connectMs)} ms.`,
        `- Where the time goes, per line: its first delivery to any subscriber (runner, bus, store write, broadcast) p50 ${ms(m.first.p50)} / p99 ${ms(m.first.p99)} ms; from there to its last delivery (the fan-out to every subscriber, and the clients reading it) p50 ${ms(m.spread.p50)} / p99 ${ms(m.spread.p99)} ms.`,
        '- Latency is measured with one clock (the machine\'s): the line\'s `timestamp` is set by the runner in the orloj process, the arrival by the client process; timestamps have millisecond resolution.',
        ...(m.excluded ? [`- ${fmt(m.excluded)} deliveries of lines printed before the last subscriber connected were left out (replayed from the store, not live).`] : []),
        ...(m.errors.length ? [`- Stream errors: ${m.errors.slice(0, 3).join('; ')}.`] : []),
        ...((m.otherCpu ?? 0) > 25 ? [`- **Disturbed**: other processes used ${pct(m.otherCpu)} of a core while the lines were delivered; latencies are pessimistic.`] : []),
      ],
      valid,
    };
  },
};
