// The command line both harness scripts share (scripts/chaos.ts,
// scripts/restart.ts): the options they both take, with the same defaults and
// checks, and the way a script turns --help, a bad option or its result into
// the process's exit code.
import { parseDuration } from '@orloj/common/core';

export class UsageError extends Error {}

/** parseArgs declarations of the options both scripts take, with the same defaults (each script adds its own). */
export const SHARED_OPTION_ARGS = {
  'job-lease-ttl': { type: 'string', default: '15s' },
  tick: { type: 'string', default: '1s' },
  'queue-timeout': { type: 'string', default: '10m' },
  'runner-concurrency': { type: 'string', default: '8' },
  'settle-timeout': { type: 'string', default: '120' },
  'log-level': { type: 'string', default: 'warn' },
  keep: { type: 'boolean', default: false },
  verbose: { type: 'boolean', short: 'v', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

export interface SharedOptions {
  jobLeaseTtl: string;
  tick: string;
  queueTimeout: string;
  runnerConcurrency: number;
  settleTimeoutS: number;
  logLevel: string;
  keep: boolean;
  verbose: boolean;
}

/** A number option of parseArgs values, within [min, max]. */
export function numberOption(values: Record<string, unknown>, name: string, min: number, max: number): number {
  const n = Number(values[name]);
  if (!Number.isFinite(n) || n < min || n > max) throw new UsageError(`--${name} must be a number from ${min} to ${max} (got "${String(values[name])}")`);
  return n;
}

/** The options of SHARED_OPTION_ARGS, checked. */
export function readSharedOptions(values: {
  'job-lease-ttl': string;
  tick: string;
  'queue-timeout': string;
  'runner-concurrency': string;
  'settle-timeout': string;
  'log-level': string;
  keep: boolean;
  verbose: boolean;
}): SharedOptions {
  const duration = (name: 'job-lease-ttl' | 'tick' | 'queue-timeout'): string => {
    if (parseDuration(values[name]) === undefined) throw new UsageError(`--${name} must be a duration such as 15s (got "${values[name]}")`);
    return values[name];
  };
  return {
    jobLeaseTtl: duration('job-lease-ttl'),
    tick: duration('tick'),
    queueTimeout: duration('queue-timeout'),
    runnerConcurrency: Math.floor(numberOption(values, 'runner-concurrency', 1, 1_024)),
    settleTimeoutS: numberOption(values, 'settle-timeout', 1, 86_400),
    logLevel: values['log-level'],
    keep: values.keep,
    verbose: values.verbose,
  };
}

/**
 * A script's options, or the exit code when there is nothing to run: --help
 * (`read` returns undefined) prints `help` (0); a bad option prints what is
 * wrong and then `help` (2).
 */
export function readOptionsOrExitCode<O>(argv: string[], help: string, read: (argv: string[]) => O | undefined): O | number {
  let options: O | undefined;
  try {
    options = read(argv);
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : String(err)}\n\n${help}`);
    return 2;
  }
  if (options === undefined) {
    process.stdout.write(help);
    return 0;
  }
  return options;
}

/** Exits the process with the code `main` comes to; 2 when it throws. */
export function exitWith(name: string, main: Promise<number>): void {
  main.then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(`${name} harness failed:`, err);
      process.exit(2);
    },
  );
}
