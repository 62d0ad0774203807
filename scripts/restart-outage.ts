// One restart of one service while the orloj processes run (scripts/restart.ts):
// how RabbitMQ and PostgreSQL are taken down and brought back (the commands
// are scripts/restart-services.ts'), and each restart measured as an Outage —
// when the service stopped, accepted connections again, and when the orloj
// processes had recovered — in real and in clock time.
import { openJobs } from './harness/database.js';
import type { HarnessRun } from './harness/run.js';
import { seconds, sleepReal } from './harness/time.js';
import {
  ensureBroker,
  ensureDatabase,
  startBroker,
  startDatabase,
  stopBroker,
  stopDatabase,
  waitForBroker,
  waitForDatabase,
  type BrokerMethod,
  type CommandResult,
  type ServiceControl,
} from './restart-services.js';

export type Service = 'broker' | 'database';

/** The options of scripts/restart.ts that shape a restart. */
export interface RestartSettings {
  brokerMethod: BrokerMethod;
  /** real seconds between rabbitmqctl's stop and start */
  brokerOutageS: number;
  /** real seconds between pg_ctlcluster stop and start */
  dbOutageS: number;
}

/** One restart of one service, in real (Date.now) and clock time. */
export interface Outage {
  service: Service;
  /** open jobs by status just before the stop */
  openBefore: string;
  stopAt: number;
  /** the stop command returned */
  stoppedAt: number;
  startAt: number;
  /** the service accepts connections again */
  upAt: number;
  /** every orloj process is attached again (broker: consumer counts; database: a live leader) */
  recoveredAt: number | undefined;
  clockStop: number;
  clockUp: number;
  notes: string[];
}

/** How the harness takes one service down and brings it back. */
interface Procedure {
  label: 'RabbitMQ' | 'PostgreSQL';
  /** how it is restarted, for the log */
  how: string;
  /** real seconds between the stop and the start */
  outageS: number;
  /** the stop and start commands, for error messages */
  stopCommand: string;
  startCommand: string;
  stop(): Promise<CommandResult>;
  start(): Promise<CommandResult>;
  /** true once the service accepts connections (within 60 s) */
  waitUp(): Promise<boolean>;
  /** brings the service back whatever its state */
  ensure(): Promise<string>;
  /** what recovery of the orloj processes means, for the log */
  recovered: string;
}

/** The services' restarts: one at a time, each measured as an Outage, and both running again at the end. */
export class ServiceRestarts {
  /** Set while a service is down on purpose. */
  readonly down = new Set<Service>();
  /** A stop command in flight: the cleanup waits for it, or the service could go down after it was brought back. */
  private stopping: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly o: RestartSettings,
    readonly control: ServiceControl,
    private readonly urls: { baseDbUrl: string; amqpUrl: string },
  ) {}

  /** HarnessRun's restoreServices: both services running again, whatever happened. Never throws. */
  async restore(log: (m: string) => void): Promise<void> {
    await this.stopping;
    for (const service of ['broker', 'database'] as const) {
      const p = this.procedure(service);
      try {
        const did = await p.ensure();
        if (!did.endsWith('is up')) log(did);
      } catch (err) {
        console.error(`could not bring ${p.label} back:`, err instanceof Error ? err.message : err);
      }
    }
  }

  procedure(service: Service): Procedure {
    const { o, control } = this;
    const { amqpUrl, baseDbUrl } = this.urls;
    if (service === 'broker') {
      return {
        label: 'RabbitMQ',
        how: `RabbitMQ (${o.brokerMethod})`,
        outageS: o.brokerOutageS,
        stopCommand: `rabbitmqctl ${o.brokerMethod}`,
        startCommand: 'rabbitmqctl start_app',
        stop: () => stopBroker(o.brokerMethod),
        start: () => startBroker(o.brokerMethod),
        waitUp: () => waitForBroker(amqpUrl, 60_000),
        ensure: () => ensureBroker(amqpUrl),
        recovered: 'every consumer re-attached',
      };
    }
    return {
      label: 'PostgreSQL',
      how: `PostgreSQL (pg_ctlcluster ${control.pgCluster.join(' ')} stop, start)`,
      outageS: o.dbOutageS,
      stopCommand: 'pg_ctlcluster stop',
      startCommand: 'pg_ctlcluster start',
      stop: () => stopDatabase(control),
      start: () => startDatabase(control),
      waitUp: () => waitForDatabase(baseDbUrl, 60_000),
      ensure: () => ensureDatabase(baseDbUrl, control),
      recovered: 'a leader is live again',
    };
  }

  /** Stops `service`, waits out the outage, starts it and measures until the orloj processes recovered. */
  async restart(run: HarnessRun, service: Service): Promise<Outage> {
    const p = this.procedure(service);
    const outage = await this.stop(run, service, p);
    await sleepReal(p.outageS * 1000);
    outage.startAt = Date.now();
    // Recovery, watched from the start command on (the service may accept connections before the command returns).
    const fromSample = run.samples.length;
    const recovery = watchRecovery(run, service, fromSample).catch(() => undefined); // no process left of a role: allUp() says so later
    // Probed while the command runs: the start command returns a while after the service accepts connections.
    const [started, up] = await Promise.all([p.start(), upWhen(() => p.waitUp())]);
    if (started.code !== 0) outage.notes.push(`${p.startCommand} failed (${started.stderr.trim()})`);
    if (up === undefined) await p.ensure();
    outage.upAt = up ?? Date.now();
    outage.recoveredAt = await recovery;
    if (outage.recoveredAt === undefined) outage.notes.push(run.aborted ? 'aborted' : 'not recovered within 60 s of the start');
    if (service === 'database') {
      // The harness's own first successful read may come before the probe's.
      const back = run.samples.slice(fromSample).find((x) => !x.unreachable);
      if (back) outage.upAt = Math.min(outage.upAt, realAt(run, back.at));
    }
    if (outage.recoveredAt !== undefined) outage.recoveredAt = Math.max(outage.recoveredAt, outage.upAt);
    outage.clockUp = Math.floor(run.origin + (outage.upAt - run.origin) * run.o.speed); // the clock at upAt
    this.down.delete(service);
    logOutage(run, p, outage);
    return outage;
  }

  /** The outage's start: open jobs, then the stop command (an error when it fails). */
  private async stop(run: HarnessRun, service: Service, p: Procedure): Promise<Outage> {
    const openBefore = await openJobs(run.store);
    const outage: Outage = {
      service,
      openBefore,
      stopAt: Date.now(),
      stoppedAt: 0,
      startAt: 0,
      upAt: 0,
      recoveredAt: undefined,
      clockStop: run.clock.now(),
      clockUp: 0,
      notes: [],
    };
    this.down.add(service);
    run.log(`restarting ${p.how}; open jobs: ${openBefore}`);
    const stopped = await (this.stopping = p.stop());
    outage.stoppedAt = Date.now();
    if (stopped.code !== 0) throw new Error(`${p.stopCommand} failed: ${stopped.stderr.trim()}`);
    return outage;
  }
}

/** Date.now() at clock time `at`. */
const realAt = (run: HarnessRun, at: number) => Math.round(run.origin + (at - run.origin) / run.o.speed);

/**
 * When the orloj processes recovered (Date.now()): every consumer attached
 * again (broker), a live leader again (database: the first live lease sample
 * from `fromSample` on); undefined after 60 s or when aborted.
 */
async function watchRecovery(run: HarnessRun, service: Service, fromSample: number): Promise<number | undefined> {
  const by = Date.now() + 60_000;
  while (!run.aborted) {
    if (service === 'broker') {
      if ((await run.attached()).all) return Date.now();
    } else {
      const live = run.samples.slice(fromSample).find((x) => x.live);
      if (live) return realAt(run, live.at);
    }
    if (Date.now() > by) break;
    await sleepReal(100);
  }
  return undefined;
}

function logOutage(run: HarnessRun, p: Procedure, outage: Outage): void {
  run.log(
    `${p.label} accepts connections again: stop took ${seconds(outage.stoppedAt - outage.stopAt)}, ` +
      `start ${seconds(outage.upAt - outage.startAt)}, down ${seconds(outage.upAt - outage.stopAt)} real = ${seconds(outage.clockUp - outage.clockStop)} clock`,
  );
  run.log(
    outage.recoveredAt
      ? `${p.recovered} ${seconds(outage.recoveredAt - outage.upAt)} after the service came back`
      : `not recovered: ${outage.notes.join('; ')}`,
  );
}

/** Date.now() when the wait succeeded, undefined when it gave up. */
async function upWhen(wait: () => Promise<boolean>): Promise<number | undefined> {
  return (await wait()) ? Date.now() : undefined;
}
