#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { ConfigError } from '@orloj/common/config';
import { createLogger } from '@orloj/common/logging';
import { ALL_ROLES, AVAILABLE_ROLES, parseRoles } from './roles.js';
import { migrate, migrationStatus, startOrloj, type RunningOrloj } from './main.js';

const HELP = `orloj — self-hosted workflow scheduling

Usage:
  orloj start [--roles <list>]   start the service (default: all roles)
  orloj migrate                  apply pending database migrations and exit
  orloj migrate --check          list pending migrations without applying them
                                 (exit 0: up to date, 3: migrations pending)
  orloj backup <file>            write a consistent copy of the embedded SQLite
                                 database to <file> (mode 0600), also while running
  orloj invite <email> [--expires 7d]
                                 print an invitation (and its sign-up link) for one
                                 email, for REGISTRATION=invitation; at most 90d
  orloj user add <email> --password-file <file>
                                 create an account, whatever REGISTRATION says
                                 (the password is the file's first line)
  orloj --help                   show this help

Roles: ${ALL_ROLES.join(', ')} (available now: ${AVAILABLE_ROLES.join(', ')}), or all.
Configuration comes from environment variables; see the README.
`;

/**
 * Start and shutdown announcements: JSON on stdout like every log line, and
 * written whatever LOG_LEVEL says (tools and operators wait for them).
 */
const announce = createLogger({ level: 'info' });

/**
 * A line on stderr that cannot fail: a closed pipe makes process.stderr emit
 * 'error' (uncaught, it would end the process mid-shutdown with a stack trace
 * nobody can read), so such errors are dropped — stdout's too, for console.log.
 */
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
function say(line: string): void {
  try {
    process.stderr.write(`${line}\n`);
  } catch {
    // The reader is gone: there is nobody to tell.
  }
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      roles: { type: 'string', default: 'all' },
      help: { type: 'boolean', short: 'h' },
      check: { type: 'boolean' },
      expires: { type: 'string' },
      'password-file': { type: 'string' },
    },
  });
  const command = positionals[0];
  if (values.help || command === 'help' || command === undefined) {
    process.stdout.write(HELP);
    return command === undefined && !values.help ? 1 : 0;
  }
  if (command === 'migrate' && values.check) {
    const status = await migrationStatus();
    // The store (better-sqlite3, pg) is loaded only by the commands that use it.
    const { DatabaseTooNewError } = await import('@orloj/common/store');
    if (status.unknown.length) throw new DatabaseTooNewError(status.unknown);
    console.log(status.pending.length ? `pending: ${status.pending.join(', ')}` : 'database is up to date');
    return status.pending.length ? 3 : 0;
  }
  if (command === 'backup') {
    if (!positionals[1] || positionals.length > 2) {
      console.error(`orloj backup takes one argument: the file to write\n\n${HELP}`);
      return 2;
    }
    const { backup } = await import('./backup.js');
    const result = backup(positionals[1]);
    console.log(`backup written: ${result.file} (${result.bytes} bytes, migration ${result.migration ?? 'none'})`);
    return 0;
  }
  if (command === 'invite' || command === 'user') return accountCommand(positionals, values);
  if (command === 'migrate') {
    const applied = await migrate();
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
    return 0;
  }
  if (command !== 'start') {
    console.error(`unknown command "${command}"\n\n${HELP}`);
    return 2;
  }
  const roles = parseRoles(values.roles ?? 'all');
  // Handlers go in before anything is started or printed: a signal that arrives
  // while there is no listener would kill the process without draining.
  const running: { orloj?: RunningOrloj } = {};
  let signalled = false;
  const shutdown = () =>
    (running.orloj ? running.orloj.stop() : Promise.resolve()).then(
      () => process.exit(0),
      (err: unknown) => {
        say(`shutdown failed: ${err instanceof Error ? err.message : String(err)}`);
        process.exit(1);
      },
    );
  // Nothing here may depend on the output: with its reader gone, every write fails (issue 30).
  const onSignal = (signal: NodeJS.Signals) => {
    // First signal drains in order; a second one forces the exit.
    if (signalled) {
      say(`${signal} again: exiting now`);
      process.exit(130);
    }
    signalled = true;
    if (running.orloj) void shutdown();
    announce.info({ signal }, `${signal}: shutting down (send again to force)`);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  const orloj = (running.orloj = await startOrloj({ roles }));
  if (orloj.port !== undefined) {
    // PORT=0 takes any free port: the default SERVER_HOST_URL cannot know it, the line can.
    const url = orloj.config.port === 0 && !process.env.SERVER_HOST_URL?.trim() ? `http://localhost:${orloj.port}` : orloj.config.serverHostUrl;
    announce.info({ roles, url, host: orloj.config.host, port: orloj.port }, `orloj is running (${roles.join(', ')}) at ${url} (listening on ${orloj.config.host}:${orloj.port})`);
    if (orloj.dashboardDir !== undefined) {
      // What someone who has just run `npm start` for the first time needs next.
      const base = url.replace(/\/+$/, '');
      announce.info({ dashboard: `${base}/`, signup: `${base}/signup` }, `the dashboard is at ${base}/ (new here? sign up at ${base}/signup with an email and a password of at least 8 characters)`);
    }
  } else if (orloj.opsPort !== undefined) {
    announce.info({ roles, host: orloj.config.host, opsPort: orloj.opsPort }, `orloj is running (${roles.join(', ')}); probes and metrics on ${orloj.config.host}:${orloj.opsPort}`);
  }
  if (signalled) void shutdown();
  return -1;
}

/** `orloj invite` and `orloj user add` (server/src/accounts.ts). */
async function accountCommand(positionals: string[], values: { expires?: string | undefined; 'password-file'?: string | undefined }): Promise<number> {
  const { addUser, invite } = await import('./accounts.js');
  try {
    if (positionals[0] === 'invite') {
      if (positionals.length !== 2) return usage('orloj invite takes one argument: the email to invite');
      const { code, link, expiresAt } = invite(positionals[1]!, values.expires);
      console.log(`invitation for ${positionals[1]!.trim().toLowerCase()}, valid until ${new Date(expiresAt).toISOString()}:\n${code}\nsign-up link: ${link}`);
      return 0;
    }
    if (positionals[1] !== 'add' || positionals.length !== 3 || !values['password-file']) {
      return usage('orloj user add takes an email and --password-file <file>');
    }
    console.log(`account created: ${await addUser(positionals[2]!, values['password-file'])}`);
    return 0;
  } catch (err) {
    // Refused input (a bad email or password, a taken email) is named field by field.
    const fields = (err as { fields?: readonly { field: string; message: string }[] }).fields;
    console.error(fields?.length ? fields.map((f) => `${f.field} ${f.message}`).join('\n') : err instanceof Error ? err.message : String(err));
    return 1;
  }
}

function usage(message: string): number {
  console.error(`${message}\n\n${HELP}`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    if (err instanceof ConfigError) console.error(err.message);
    else if (err instanceof Error && err.name === 'TypeError' && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS')) {
      console.error(`${err.message}\n\n${HELP}`);
    } else console.error('orloj failed to start:', err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
