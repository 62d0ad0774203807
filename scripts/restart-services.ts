// Stopping and starting the local PostgreSQL and RabbitMQ the test suite uses
// (scripts/services.sh starts them): for scripts/restart.ts and the hooks of
// server/test/restart.test.ts, which must leave both services running.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import amqp from 'amqplib';
import pg from 'pg';

export interface CommandResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a command without blocking the event loop; never rejects. */
export function run(command: string, args: readonly string[], timeoutMs = 60_000): Promise<CommandResult> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(command, args, { timeout: timeoutMs, encoding: 'utf8' }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
      resolve({ code, stdout, stderr: stderr || (err && !stderr ? err.message : ''), ms: Date.now() - started });
    });
  });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(':').some((dir) => dir !== '' && fs.existsSync(`${dir}/${command}`));
}

function isLocal(url: string): boolean {
  try {
    return ['127.0.0.1', 'localhost', '[::1]', '::1'].includes(new URL(url).hostname);
  } catch {
    return false;
  }
}

export interface ServiceControl {
  /** `<version> <name>` for pg_ctlcluster, e.g. ["15", "main"]. */
  pgCluster: [string, string];
}

/**
 * Whether this machine can restart the services behind the two URLs: both
 * local, rabbitmqctl and pg_ctlcluster present, one PostgreSQL cluster found
 * (or named in ORLOJ_TEST_PG_CLUSTER, e.g. "15/main"). A string says why not.
 */
export function serviceControl(databaseUrl: string, amqpUrl: string): ServiceControl | string {
  if (!isLocal(databaseUrl) || !isLocal(amqpUrl)) return 'PostgreSQL or RabbitMQ is not on this machine: cannot restart it';
  if (!onPath('rabbitmqctl')) return 'rabbitmqctl is not installed here';
  if (!onPath('pg_ctlcluster')) return 'pg_ctlcluster is not installed here';
  const named = process.env.ORLOJ_TEST_PG_CLUSTER;
  if (named) {
    const [version, name] = named.split('/');
    if (!version || !name) return `ORLOJ_TEST_PG_CLUSTER must look like 15/main (got "${named}")`;
    return { pgCluster: [version, name] };
  }
  let versions: string[] = [];
  try {
    versions = fs.readdirSync('/etc/postgresql').filter((v) => fs.existsSync(`/etc/postgresql/${v}/main`));
  } catch {
    // none
  }
  if (versions.length !== 1) return `expected one PostgreSQL cluster under /etc/postgresql, found ${versions.length} (set ORLOJ_TEST_PG_CLUSTER=<version>/<name>)`;
  return { pgCluster: [versions[0]!, 'main'] };
}

// ---- RabbitMQ ----------------------------------------------------------------------

export async function brokerAccepts(amqpUrl: string): Promise<boolean> {
  try {
    const conn = await amqp.connect(amqpUrl, { timeout: 5_000 });
    conn.on('error', () => {});
    // A fresh node accepts connections a moment before it can declare queues: ask for a channel too.
    const ch = await conn.createChannel();
    await ch.close();
    await conn.close();
    return true;
  } catch {
    return false;
  }
}

export async function waitForBroker(amqpUrl: string, timeoutMs: number): Promise<boolean> {
  const by = Date.now() + timeoutMs;
  while (Date.now() < by) {
    if (await brokerAccepts(amqpUrl)) return true;
    await sleep(200);
  }
  return brokerAccepts(amqpUrl);
}

/**
 * 'stop_app' stops the RabbitMQ application (every connection drops; durable
 * queues and their messages stay on disk); 'close_connections' only closes
 * every client connection, for a node that takes too long to come back.
 */
export type BrokerMethod = 'stop_app' | 'close_connections';

export async function stopBroker(method: BrokerMethod): Promise<CommandResult> {
  return method === 'stop_app' ? run('rabbitmqctl', ['stop_app']) : run('rabbitmqctl', ['close_all_connections', 'orloj restart test']);
}

export async function startBroker(method: BrokerMethod): Promise<CommandResult> {
  return method === 'stop_app' ? run('rabbitmqctl', ['start_app']) : { code: 0, stdout: '', stderr: '', ms: 0 };
}

/**
 * Makes sure the broker accepts connections: start_app when the node runs
 * with its application stopped, `rabbitmq-server -detached` when the node is
 * down (as scripts/services.sh does). Returns what it did, or throws.
 */
export async function ensureBroker(amqpUrl: string, timeoutMs = 90_000): Promise<string> {
  if (await brokerAccepts(amqpUrl)) return 'RabbitMQ is up';
  const started = await run('rabbitmqctl', ['start_app']);
  if (started.code === 0 && (await waitForBroker(amqpUrl, timeoutMs))) return 'RabbitMQ was stopped: start_app brought it back';
  await run('rabbitmq-server', ['-detached']);
  if (await waitForBroker(amqpUrl, timeoutMs)) return 'RabbitMQ was down: rabbitmq-server -detached brought it back';
  throw new Error(`RabbitMQ does not accept connections at ${amqpUrl} (start_app: ${started.stderr.trim() || started.code})`);
}

// ---- PostgreSQL --------------------------------------------------------------------

export async function databaseAccepts(databaseUrl: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function waitForDatabase(databaseUrl: string, timeoutMs: number): Promise<boolean> {
  const by = Date.now() + timeoutMs;
  while (Date.now() < by) {
    if (await databaseAccepts(databaseUrl)) return true;
    await sleep(200);
  }
  return databaseAccepts(databaseUrl);
}

function pgCtl(control: ServiceControl, action: 'start' | 'stop' | 'restart'): Promise<CommandResult> {
  // stop and restart use the "fast" shutdown mode: open sessions are terminated.
  return run('pg_ctlcluster', ['--skip-systemctl-redirect', ...control.pgCluster, action]);
}

export const stopDatabase = (control: ServiceControl) => pgCtl(control, 'stop');
export const startDatabase = (control: ServiceControl) => pgCtl(control, 'start');

/** Makes sure PostgreSQL accepts connections, starting the cluster when it does not. Returns what it did, or throws. */
export async function ensureDatabase(databaseUrl: string, control: ServiceControl, timeoutMs = 60_000): Promise<string> {
  if (await databaseAccepts(databaseUrl)) return 'PostgreSQL is up';
  const started = await startDatabase(control);
  if (await waitForDatabase(databaseUrl, timeoutMs)) return `PostgreSQL was down: pg_ctlcluster ${control.pgCluster.join(' ')} start brought it back`;
  throw new Error(`PostgreSQL does not accept connections at ${databaseUrl} (pg_ctlcluster start: ${started.stderr.trim() || started.code})`);
}
