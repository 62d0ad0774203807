/**
 * Every environment variable orloj reads, declared once: one row each, with its
 * parser and bounds, its default and its documentation line. The Config type's
 * values, the validation at start and the settings table of docs/operations.md
 * (settingsTable, checked by common/test/settings-docs.test.ts) all come from
 * here; a role built without a Config takes a default as `SETTINGS.NAME.default`.
 * Constants nobody sets live beside the code that uses them. ADR 0018.
 */
import { JOB_TIMEOUTS } from '../domain/payload.js';
import { age, bool, decimal, derived, duration, file, int, list, oneOf, text, type Report, type Setting } from './setting-kinds.js';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;


function origin(value: string, report: Report): string | undefined {
  try {
    const u = new URL(value);
    if (u.protocol === 'http:' || u.protocol === 'https:') return u.origin;
  } catch {
    // reported below
  }
  report('must hold http(s) origins such as https://orloj.example.com', value);
  return undefined;
}

/** A host-name pattern: `*`, `name.example`, or `.example.com` (the domain and its subdomains); lower-cased. */
function hostName(value: string, report: Report): string | undefined {
  const v = value.toLowerCase().replace(/\.$/, '');
  if (v === '*' || /^\.?[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*$/.test(v)) return v;
  report('must hold host names such as orloj.example.com or .example.com, without scheme or port, or *', value);
  return undefined;
}

// A registry host name, or host:port, as the first component of an image reference names it.
const REGISTRY_ENTRY = /^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*(?::\d{1,5})?$|^\[[0-9a-f:.]+\](?::\d{1,5})?$/;

function registry(value: string, report: Report): string | undefined {
  const v = value.toLowerCase();
  if (REGISTRY_ENTRY.test(v)) return v;
  report('must hold registry hosts such as docker.io or registry.example.com:5000', v);
  return undefined;
}

/** A check on a whole value that states what it wants. */
const matching = (pattern: RegExp, wants: string, quote = true) => (value: string, report: Report) => {
  if (pattern.test(value)) return value;
  report(wants, quote ? value : null);
  return undefined;
};

function clock(value: string, report: Report): string | undefined {
  const m = /^accelerated:\d+:(\d+(?:\.\d+)?)$/.exec(value);
  if (value === 'system' || (m && Number(m[1]) > 0)) return value;
  report('must be system or accelerated:<origin-ms>:<speed>');
  return undefined;
}

function frozen<T extends Record<string, object>>(rows: T): Readonly<T> {
  for (const row of Object.values(rows)) Object.freeze(row);
  return Object.freeze(rows);
}

const TLS = (what: string, doc: string) => ({
  CA_FILE: file(`${what}: verify the server against this CA (PEM). ${doc}`),
  CERT_FILE: file(`${what}: this process's client certificate (PEM); needs the KEY_FILE.`),
  KEY_FILE: file(`${what}: the client certificate's private key (PEM); needs the CERT_FILE.`),
});
const DB_TLS = TLS('PostgreSQL over TLS', "Unset: TLS only as DATABASE_URL's `sslmode`/`sslrootcert`/`sslcert`/`sslkey` say (use one way or the other, not both); with a certificate, `hostssl … cert` logs in as its CN. [deploy/README.md](../deploy/README.md#certificates) makes the files.");
const BUS_TLS = TLS('The broker over `amqps://`', "Unset: the system's CAs; with a certificate and no password in `BUS_URL` the process logs in as the certificate (SASL EXTERNAL).");

export const SETTINGS = frozen({
  PORT: int(0, 65535, 8080, 'HTTP port of the api.'),
  HOST: text('127.0.0.1', 'Address to listen on; set `0.0.0.0` to accept connections from other machines or containers.'),
  DATA_DIR: text('./data', 'Where the embedded database, generated secrets and keys live. Created 0700 (its files 0600); an existing one open to other users is reported at start.', undefined, 'directory'),
  DASHBOARD_DIR: derived('`dashboard/dist`', 'The built dashboard the api serves at `/` (`npm run build` makes it). Missing: the API alone is served, with a warning.', undefined, 'directory'),
  DATABASE_URL: derived('`sqlite:$DATA_DIR/orloj.db`', 'The store. Migrations run automatically at start.', matching(/^(sqlite:|postgres:\/\/|postgresql:\/\/)/, 'must start with sqlite: or postgres://', false), '`sqlite:<path>` or `postgres://user:pass@host:5432/db`'),
  DB_POOL_SIZE: int(1, 1000, 10, 'PostgreSQL connections per process.'),
  SQLITE_READ_WORKERS: {
    ...int(0, 64, 0, 'SQLite: threads that run the heavy reads (log pages and searches, workflow pages) off the event loop, each with a read-only connection of its own ([ADR 0009](adr/0009-sqlite-reads-on-reader-threads.md)); `0` picks one less than the CPUs the process may use, at least 1 and at most 4.'),
    shown: 'CPUs − 1 (1 to 4)',
  },
  DATABASE_TLS_CA_FILE: DB_TLS.CA_FILE,
  DATABASE_TLS_CERT_FILE: DB_TLS.CERT_FILE,
  DATABASE_TLS_KEY_FILE: DB_TLS.KEY_FILE,
  LIST_CACHE_MB: int(0, 65_536, 32, 'Memory for rendered `GET /workflows` pages per api process, each reused only while the user\'s workflows are unchanged (`docs/api.md`); `0` turns it off.'),
  SERVER_HOST_URL: derived('`http://localhost:$PORT`', 'The public origin. `https://…` makes cookies `Secure`. Mutating requests carrying an `Origin` must come from here or from `SERVER_ALLOWED_ORIGINS`.', origin, 'http(s) origin'),
  SERVER_ALLOWED_ORIGINS: list('Origins allowed by CORS (with credentials).', origin, [], 'comma-separated http(s) origins'),
  SERVER_ALLOWED_HOSTS: list("`Host` names served besides `SERVER_HOST_URL`'s host, `localhost` and IP addresses (which are always served): `orloj.example.com`, `.example.com` for a domain and its subdomains, or `*` for any name (turns off DNS-rebinding protection). Other names get 400 `host_not_allowed` ([security.md](security.md)).", hostName, [], 'comma-separated host names, `.domain`s or `*`'),
  SERVER_SAME_SITE_MODE: oneOf(['Lax', 'Strict', 'None'] as const, 'Lax', 'The cookies\' SameSite mode; `None` needs an https `SERVER_HOST_URL`.'),
  SESSION_EXPIRY: duration(7 * DAY, 'Session lifetime.'),
  CSRF_EXPIRY: duration(7 * DAY, 'CSRF token lifetime; at most `SESSION_EXPIRY`.'),
  SESSION_SECRET: derived('generated', 'Seals the session cookie. When unset (and no `SESSION_SECRET_FILE`), generated once and kept in `$DATA_DIR/secrets.json` (mode 0600). Give every api replica the same.', undefined, 'text, at least 32 characters'),
  SESSION_SECRET_FILE: file('A file holding `SESSION_SECRET` (set one of the two).'),
  CSRF_HMAC_SECRET: derived('generated', 'Signs CSRF tokens. Same generation rule and replicas as `SESSION_SECRET`.', undefined, 'text, at least 32 characters'),
  CSRF_HMAC_SECRET_FILE: file('A file holding `CSRF_HMAC_SECRET` (set one of the two).'),
  LOG_LEVEL: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, 'info', 'Logs are JSON (pino).'),
  RATE_LIMIT_ENABLED: bool(true, 'Per-client-address limits; turn off when an ingress enforces them.'),
  RATE_LIMIT_AUTH_PER_MINUTE: int(1, 1_000_000, 10, 'Login and registration attempts per client address and minute.'),
  RATE_LIMIT_AUTH_BURST: int(0, 1_000_000, 5, 'Login and registration attempts beyond the rate a client may make at once.'),
  RATE_LIMIT_API_PER_SECOND: int(1, 1_000_000, 20, 'Requests to every other route per client address and second.'),
  RATE_LIMIT_API_BURST: int(0, 1_000_000, 40, 'Requests beyond that rate a client may make at once.'),
  TRUSTED_PROXIES: list('IPs/CIDRs whose `X-Forwarded-For` is believed for the client address, and whose `X-Request-Id` is kept as the request id. Their connections are not counted per address (below).', undefined, [], 'comma-separated IPs and CIDRs'),
  HTTP_MAX_CONNECTIONS: int(1, 1_000_000, 4_096, 'Open connections an api process accepts; further ones are closed at once. Keep it below the process\'s file limit (`ulimit -n`).'),
  HTTP_MAX_CONNECTIONS_PER_CLIENT: int(1, 1_000_000, 256, 'Open connections from one client address (the socket\'s; a `TRUSTED_PROXIES` peer is not counted); further ones are closed as soon as they are accepted, so one client cannot take every connection ([security.md](security.md), "Availability").'),
  HTTP_HEADERS_TIMEOUT: duration(10 * SECOND, 'How long a connection may take to send a request\'s headers, the first one included: a connection that sends nothing is closed then, and half-sent headers get 408.', { min: SECOND, max: MINUTE }),
  HTTP_MAX_HEAVY_REQUESTS: int(1, 10_000, 8, 'Requests with large answers (workflow pages and reads, log pages, searches, downloads) an api process serves at once; each holds its place until its answer is sent, the others wait (503 with `Retry-After` after 30 s).'),
  HTTP_MAX_HEAVY_REQUESTS_PER_USER: int(1, 10_000, 2, 'The same, per user.'),
  LIVE_TAIL_MAX_STREAMS_PER_USER: int(1, 100_000, 10, 'Live log tails one user may hold open in an api process, from any number of addresses (besides 5 per address); the next is 429.'),
  LIVE_TAIL_HOLD_AFTER_END: duration(60 * SECOND, 'How long a live tail\'s event stream stays open after its `end` event (keep-alive comments only) when the client does not close it. A stream the server ends is an error to EventSource clients that close only once they see the job finished ([api.md](api.md), "Live tail").', { max: 60 * SECOND }),
  REGISTRATION: oneOf(['open', 'closed', 'invitation'] as const, 'open', 'Who may create an account: anyone, nobody (the operator adds accounts with `orloj user add`), or whoever holds an invitation from `orloj invite <email>`. The first account of an empty installation can always be created. See "Accounts".'),
  BUS_URL: text('memory:', 'The bus: in-process (one process only) or RabbitMQ.', matching(/^(memory:|amqps?:\/\/)/, 'must be memory: or amqp://…', false), '`memory:` or `amqp(s)://…`'),
  BUS_PREFIX: text('orloj.', 'Prefix of every queue and exchange name (one broker, several installations).'),
  BUS_BATCH: bool(true, 'Whether what a role publishes together is signed once: job and domain events in one batch envelope, a hand-out pass\'s jobs under one signature ([bus.md](bus.md), "Batches"). Consumers take both forms either way. Turn off while replacing processes of a release before batches, whose consumers refuse them; on again once none is left.'),
  BUS_TLS_CA_FILE: BUS_TLS.CA_FILE,
  BUS_TLS_CERT_FILE: BUS_TLS.CERT_FILE,
  BUS_TLS_KEY_FILE: BUS_TLS.KEY_FILE,
  SCHEDULER_ID: derived('`scheduler-<hostname>-<pid>-<random>`', "This replica's name in the leader lease (`leases` table); the lease holder adds a per-process suffix to it anyway, so two processes never share a lease or a fencing token, even with the same id."),
  SCHEDULER_TICK: duration(1 * SECOND, 'How often the leader renews its lease and scans for builds, lost jobs and stops; due slots do not wait for it: between ticks the leader wakes when the earliest slot falls due (at least 50 ms after its last pass), and the api nudges it (`orloj.scheduler-wake`) when a build or a manual job is waiting.'),
  LEADER_LEASE_TTL: duration(15 * SECOND, "How long a leader's lease lasts without renewal; a crashed leader is replaced after at most this long."),
  JOB_LEASE_TTL: duration(30 * SECOND, 'A running job whose runner has not reported for this long is presumed lost; runners report every third of it. Same value for scheduler and runners.'),
  SCHEDULER_MAX_QUEUED: int(1, 1_000_000, 2_000, 'Most jobs handed out and not yet started; when the runners fall behind, the leader stops creating and handing out jobs until they catch up (due workflows then run their most recent slot, as after downtime) instead of taking the CPU and queue space the runners need.'),
  JOB_QUEUE_TIMEOUT: duration(10 * MINUTE, 'A job handed out but not started for this long is handed out again as a new attempt (its first message expires then).'),
  BUILD_TIMEOUT: duration(5 * MINUTE, 'A CONTAINER build without a result for this long is requested again.'),
  RUNNER_ID: derived('`runner-<hostname>-<random>`', "Names the runner in events and in its containers' `orloj.runner_id` label; at start it removes containers carrying its id (and its installation), so the default, new for every process, never touches another runner's containers. Set a stable id per runner (unique!) only if a restarted runner should remove what its crashed predecessor left at once; otherwise those leftovers are removed when their workflow next runs.", matching(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/, 'must be 1-128 letters, digits or _ . : -'), '1–128 letters, digits, `_ . : -`'),
  RUNNER_CONCURRENCY: int(1, 1024, 4, 'Jobs one runner runs at once.'),
  RUNNER_SHUTDOWN_GRACE: duration(30 * SECOND, 'On SIGTERM, how long running jobs may finish before they are handed back.'),
  RUNNER_ALLOW_TARGETS: list('CIDRs re-allowed in the HEARTBEAT address guard ([heartbeat.md](heartbeat.md)).', undefined, [], 'comma-separated CIDRs'),
  RUNNER_DENY_TARGETS: list('CIDRs added to the HEARTBEAT address guard ([heartbeat.md](heartbeat.md)).', undefined, [], 'comma-separated CIDRs'),
  DOCKER_HOST: derived('`unix:///var/run/docker.sock` if present', 'Docker or Podman API endpoint for CONTAINER jobs; none: CONTAINER jobs fail with `SYSTEM_ERROR` ([container-runtime.md](container-runtime.md)).', undefined, 'URL'),
  NOTIFIER_POLL_INTERVAL: duration(500, "How often the notifier's relay looks for new domain events: the main part of the delay before a notification or counter shows a change ([notifications.md](notifications.md))."),
  CONTAINER_REGISTRIES: list('Registries CONTAINER images may come from (`docker.io`, `ghcr.io`, `registry.example.com:5000`); other images, and image ids (`sha256:…`), are refused with 400. `localhost` allows locally built `localhost/…` images, which are never pulled. An entry that is a loopback, link-local or denied address stops the runners from starting unless `RUNNER_ALLOW_TARGETS` re-allows it ([security.md](security.md)).', registry, ['docker.io'], 'comma-separated registry hosts'),
  CONTAINER_NETWORK_ENABLED: bool(false, 'Whether payloads may ask for `"network": "bridge"`. A networked container reaches whatever the host\'s bridge reaches, **around** the runners\' address guard and `RUNNER_DENY_TARGETS`.'),
  CONTAINER_MAX_MEMORY_MB: int(6, 65_536, 1024, 'Most `memory_mb` a payload may ask for; also caps the 512 MiB default.'),
  CONTAINER_MAX_CPUS: decimal(64, 1, 'Most `cpus` a payload may ask for; containers without `cpus` get this limit.'),
  CONTAINER_MAX_TIMEOUT: duration(30 * MINUTE, 'Most `timeout` a CONTAINER payload may ask for.', { max: JOB_TIMEOUTS.containerTimeoutMaxMs }),
  CONTAINER_SCRATCH_MB: int(1, 65_536, 256, 'Each writable tmpfs of a container (`/tmp`, `/var/tmp`, `/run`) over its read-only root; counts against the job\'s memory. Nothing a container writes reaches the host\'s disk ([container-runtime.md](container-runtime.md)).'),
  CONTAINER_USERNS: oneOf(['auto', 'host'] as const, 'auto', '`auto`: a user namespace per container where the runtime offers one (Podman: needs `containers:2147483647:2147483648` in `/etc/subuid` and `/etc/subgid`; Docker: enable the daemon\'s `userns-remap`); `host`: none, container root is host root ([container-runtime.md](container-runtime.md), "User namespaces").'),
  JOB_LOG_MAX_LINES: int(1, 100_000_000, 100_000, 'Per job attempt: lines of log kept. Past it (or `JOB_LOG_MAX_MB`), the log ends with one `[orloj] log limit reached …` line, the job shows `log_truncated: true`, and further lines are counted (analytics) but not stored.'),
  JOB_LOG_MAX_MB: int(1, 1_048_576, 32, 'Per job attempt: MiB of log text kept (as `JOB_LOG_MAX_LINES`).'),
  MAX_WORKFLOWS_PER_USER: int(1, 10_000_000, 500, 'Workflows one user may own (terminated ones included until deleted); beyond it `POST /workflows` answers 409 `workflow_limit_reached`.'),
  MAX_ACTIVE_JOBS_PER_USER: int(0, 1_000_000, 0, "An optional hard limit on jobs of one user handed to the runners (QUEUED or RUNNING) at once, even while runners are idle; `0` is none. Without it the runners are shared fairly: each user wanting them gets an equal part, a lone user gets them all (docs/security.md, \"Fairness between users\"). Set it where tenants are untrusted and jobs long (jobs are not pre-empted), e.g. to the runner slots (`RUNNER_CONCURRENCY` × runners) divided by the users expected at once."),
  OPS_PORT: int(0, 65535, 9464, 'Port (on `HOST`) of `/livez`, `/readyz` and `/metrics` in a process without the api role; `0` takes any free port (the start line says which). The api serves them on `PORT`. See "Probes, metrics and request logs".'),
  RETENTION_JOBS: age(90 * DAY, 'Ended jobs (`COMPLETED`, `FAILED`, `CANCELED`) whose `completed_at` is older than this are deleted, with their log lines, and so are one-off maintenance windows and snoozes that ended before it; `off` keeps them. See "Retention".'),
  RETENTION_JOB_LOGS: age(30 * DAY, 'Log lines of jobs that ended longer ago than this are deleted; the jobs stay until `RETENTION_JOBS`; `off` keeps lines as long as their job.'),
  RETENTION_NOTIFICATIONS: age(90 * DAY, 'Notifications created longer ago than this are deleted, read or not; `off` keeps them.'),
  RETENTION_KEEP_JOBS: int(0, 10_000, 20, "The newest jobs of every workflow (in the job list's order, so its whole first page) are kept with their log lines, however old: a workflow that runs weekly, or stopped running, still shows its last runs; `0` keeps none."),
  RETENTION_INTERVAL: duration(1 * HOUR, 'Time between two sweeps of the scheduler leader.'),
  RETENTION_BATCH_SIZE: int(1, 100_000, 500, 'Rows per delete statement.'),
  ORLOJ_CLOCK: text('system', 'Test hook: `accelerated:<origin-ms>:<speed>` runs every role on a faster clock.', clock, '`system` or `accelerated:<origin-ms>:<speed>`'),
} satisfies Record<string, Setting<unknown>>);

export type SettingName = keyof typeof SETTINGS;

/** The settings table of docs/operations.md, one row per declaration, in declaration order. */
export function settingsTable(): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  const rows = Object.entries(SETTINGS).map(([name, s]: [string, Setting<unknown>]) => `| \`${name}\` | ${cell(s.shown)} | ${cell(s.accepts)} | ${cell(s.doc)} |`);
  return ['| variable | default | accepts | meaning |', '|---|---|---|---|', ...rows].join('\n');
}
