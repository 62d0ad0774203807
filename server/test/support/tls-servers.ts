/**
 * Private servers for the deployment tests, started from scratch directories on
 * free ports with the files shipped in deploy/ — never the machine's shared
 * PostgreSQL or RabbitMQ: a TLS-only RabbitMQ node requiring client
 * certificates (deploy/rabbitmq), a PostgreSQL cluster with `hostssl … cert`
 * (deploy/postgres), and the certificates of deploy/tls/generate.sh. Missing
 * packages are installed when running as root; otherwise the suite skips, or
 * fails under REQUIRE_SERVICES=1.
 */
import { execFile, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { requireServices } from '@orloj/common/test-support';

const run = promisify(execFile);
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const deployDir = path.join(repoRoot, 'deploy');

export const ROLES = ['api', 'scheduler', 'runners', 'log-ingest', 'notifier'] as const;
export type DeployRole = (typeof ROLES)[number];

/** A port nobody listens on right now. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function onPath(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const file = path.join(dir, command);
    if (fs.existsSync(file)) return file;
  }
  return undefined;
}

let aptUpdated = false;

/**
 * The path of `command`, installing the Debian package when it is missing and
 * we are root (as scripts/services.sh does). Skips the suite when it cannot be
 * had, or throws under REQUIRE_SERVICES=1.
 */
export async function needTool(ctx: Mocha.Context, command: string, pkg: string, candidates: string[] = []): Promise<string> {
  const find = () => [onPath(command), ...candidates].find((f) => f !== undefined && fs.existsSync(f));
  let found = find();
  if (!found && process.getuid?.() === 0) {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    if (!aptUpdated) {
      await run('apt-get', ['update', '-qq'], { env }).catch(() => undefined);
      aptUpdated = true;
    }
    await run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', pkg], { env, maxBuffer: 64 << 20 }).catch(() => undefined);
    found = find();
  }
  if (found) return found;
  if (requireServices) throw new Error(`REQUIRE_SERVICES=1 but ${command} (Debian package ${pkg}) is missing and could not be installed`);
  ctx.skip();
  throw new Error('unreachable');
}

/** A scratch directory others (the postgres user) may traverse. */
export function scratchDir(name: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `orloj-${name}-`));
  fs.chmodSync(dir, 0o755);
  return dir;
}

/** Runs deploy/tls/generate.sh into `<dir>/tls`. */
export async function generateCertificates(dir: string): Promise<string> {
  const out = path.join(dir, 'tls');
  await run(path.join(deployDir, 'tls', 'generate.sh'), [out]);
  return out;
}

/** BUS_TLS_* or DATABASE_TLS_* for one role's certificate (none: the CA alone). */
export function tlsEnv(prefix: 'BUS_TLS' | 'DATABASE_TLS', certs: string, role: DeployRole | undefined): Record<string, string> {
  return {
    [`${prefix}_CA_FILE`]: path.join(certs, 'ca.crt'),
    ...(role
      ? { [`${prefix}_CERT_FILE`]: path.join(certs, `orloj-${role}.crt`), [`${prefix}_KEY_FILE`]: path.join(certs, `orloj-${role}.key`) }
      : {}),
  };
}

export interface Rabbit {
  /** amqps://localhost:<port> without credentials: the client certificate logs in. */
  url: string;
  /** The user of every open client connection (rabbitmqctl list_connections). */
  connectionUsers(): Promise<string[]>;
  /** The broker's users (rabbitmqctl list_users). */
  users(): Promise<string[]>;
  stop(): Promise<void>;
}

/**
 * A RabbitMQ node of its own (node name, ports, mnesia, cookie) with
 * deploy/rabbitmq's rabbitmq.conf, enabled_plugins and definitions.json,
 * pointed at the scratch certificates.
 */
export async function startRabbit(ctx: Mocha.Context, dir: string, certs: string): Promise<Rabbit> {
  const bin = path.dirname(await needTool(ctx, 'rabbitmq-server', 'rabbitmq-server', ['/usr/lib/rabbitmq/bin/rabbitmq-server']));
  // The Debian wrappers in /usr/sbin switch to the rabbitmq user; the scripts behind them run as us.
  const libBin = fs.existsSync('/usr/lib/rabbitmq/bin/rabbitmq-server') ? '/usr/lib/rabbitmq/bin' : bin;
  const home = path.join(dir, 'rabbitmq');
  fs.mkdirSync(home, { recursive: true });
  const port = await freePort();
  const distPort = await freePort();
  const node = `orloj-test-${crypto.randomBytes(4).toString('hex')}@localhost`;
  const conf = fs
    .readFileSync(path.join(deployDir, 'rabbitmq', 'rabbitmq.conf'), 'utf8')
    .replaceAll('/etc/rabbitmq/tls/', `${certs}/`)
    .replace('/etc/rabbitmq/definitions.json', path.join(deployDir, 'rabbitmq', 'definitions.json'))
    .replace('listeners.ssl.default = 5671', `listeners.ssl.default = ${port}`)
    .replace(/^disk_free_limit\.absolute = .*$/m, 'disk_free_limit.absolute = 50MB');
  fs.writeFileSync(path.join(home, 'rabbitmq.conf'), conf);
  fs.writeFileSync(path.join(home, 'rabbitmq-env.conf'), '');
  const env = {
    ...process.env,
    HOME: home,
    RABBITMQ_NODENAME: node,
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_CONF_ENV_FILE: path.join(home, 'rabbitmq-env.conf'),
    RABBITMQ_CONFIG_FILE: path.join(home, 'rabbitmq.conf'),
    RABBITMQ_ADVANCED_CONFIG_FILE: path.join(home, 'advanced.config'),
    RABBITMQ_ENABLED_PLUGINS_FILE: path.join(deployDir, 'rabbitmq', 'enabled_plugins'),
    RABBITMQ_MNESIA_BASE: path.join(home, 'mnesia'),
    RABBITMQ_LOG_BASE: path.join(home, 'log'),
    RABBITMQ_PID_FILE: path.join(home, 'rabbitmq.pid'),
    ERL_EPMD_ADDRESS: '127.0.0.1',
  };
  const log = fs.openSync(path.join(home, 'server.log'), 'a');
  const server = spawn(path.join(libBin, 'rabbitmq-server'), [], { env, detached: true, stdio: ['ignore', log, log] });
  fs.closeSync(log);
  const exited = new Promise<number | null>((resolve) => server.once('exit', resolve));
  const ctl = (...args: string[]) => run(path.join(libBin, 'rabbitmqctl'), ['-n', node, ...args], { env });
  const stop = async () => {
    await ctl('stop').catch(() => undefined);
    if (server.exitCode === null && server.pid) {
      try {
        process.kill(-server.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await exited;
  };
  try {
    await Promise.race([
      // waits for the pid file, then for the node to finish booting
      ctl('wait', env.RABBITMQ_PID_FILE, '--timeout', '90'),
      exited.then((code) => {
        throw new Error(`rabbitmq-server exited with ${code}; see ${home}/server.log`);
      }),
    ]);
  } catch (err) {
    await stop();
    throw err;
  }
  const column = async (...args: string[]) =>
    (await ctl(...args, '--quiet', '--no-table-headers')).stdout
      .split('\n')
      .map((s) => s.trim().split(/\s+/)[0] ?? '')
      .filter(Boolean);
  return { url: `amqps://localhost:${port}`, connectionUsers: () => column('list_connections', 'user'), users: () => column('list_users'), stop };
}

export interface Postgres {
  /** postgres://<user>@localhost:<port>/orloj */
  url(user: string): string;
  /** Runs SQL in the orloj database as the superuser (local socket); its output, unaligned. */
  psql(sql: string): Promise<string>;
  /** The logins the server accepted so far, from its log. */
  loggedIn(): { user: string; database: string }[];
  stop(): Promise<void>;
}

/**
 * A PostgreSQL cluster of its own: initdb into the scratch directory, the
 * server certificate, deploy/postgres's pg_hba.conf and postgresql.tls.conf
 * (paths pointed at the scratch files), and deploy/postgres/roles.sql.
 */
export async function startPostgres(ctx: Mocha.Context, dir: string, certs: string): Promise<Postgres> {
  const pgBins = fs.existsSync('/usr/lib/postgresql') ? fs.readdirSync('/usr/lib/postgresql').map((v) => `/usr/lib/postgresql/${v}/bin/initdb`) : [];
  const bin = path.dirname(await needTool(ctx, 'initdb', 'postgresql', pgBins));
  const psqlBin = await needTool(ctx, 'psql', 'postgresql-client');
  const root = process.getuid?.() === 0;
  const asPostgres = (file: string, args: string[]) => (root ? run('runuser', ['-u', 'postgres', '--', file, ...args]) : run(file, args));
  const data = path.join(dir, 'postgres');
  const tls = path.join(dir, 'postgres-tls');
  const socketDir = path.join(dir, 'postgres-socket');
  fs.mkdirSync(tls);
  fs.mkdirSync(socketDir);
  for (const f of ['ca.crt', 'postgres.crt', 'postgres.key']) fs.copyFileSync(path.join(certs, f), path.join(tls, f));
  if (root) {
    fs.mkdirSync(data, { mode: 0o700 });
    for (const f of [data, tls, socketDir, ...fs.readdirSync(tls).map((f) => path.join(tls, f))]) await run('chown', ['postgres:postgres', f]);
  }
  fs.chmodSync(path.join(tls, 'postgres.key'), 0o600);
  await asPostgres(path.join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  const hba = fs.readFileSync(path.join(deployDir, 'postgres', 'pg_hba.conf'), 'utf8').replace(/^local\s+all\s+postgres\s+peer$/m, 'local all postgres trust');
  fs.writeFileSync(path.join(data, 'pg_hba.conf'), hba);
  const tlsConf = fs.readFileSync(path.join(deployDir, 'postgres', 'postgresql.tls.conf'), 'utf8').replaceAll('/etc/postgresql/tls/', `${tls}/`);
  fs.appendFileSync(
    path.join(data, 'postgresql.conf'),
    `\n${tlsConf}\nport = ${port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '${socketDir}'\nfsync = off\nmax_connections = 60\nlog_connections = on\n`,
  );
  const pgCtl = path.join(bin, 'pg_ctl');
  await asPostgres(pgCtl, ['-D', data, '-l', path.join(data, 'server.log'), '-w', '-t', '60', 'start']);
  const psql = (database: string, args: string[]) =>
    run(psqlBin, ['-h', socketDir, '-p', String(port), '-U', 'postgres', '-d', database, '-v', 'ON_ERROR_STOP=1', '-q', ...args]).then((r) => r.stdout);
  const stop = async () => {
    await asPostgres(pgCtl, ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
  };
  try {
    await psql('postgres', ['-f', path.join(deployDir, 'postgres', 'roles.sql')]);
  } catch (err) {
    await stop();
    throw err;
  }
  // Every login the server accepted (log_connections): a pool that closed its idle connections still shows.
  const loggedIn = () => [...fs.readFileSync(path.join(data, 'server.log'), 'utf8').matchAll(/connection authorized: user=(\S+) database=(\S+)/g)].map((m) => ({ user: m[1]!, database: m[2]! }));
  return { url: (user) => `postgres://${encodeURIComponent(user)}@localhost:${port}/orloj`, psql: (sql) => psql('orloj', ['-Atc', sql]), loggedIn, stop };
}
