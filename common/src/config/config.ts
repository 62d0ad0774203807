import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { parseDuration } from '../domain/duration.js';

/**
 * Configuration, read once from environment variables, validated, frozen.
 * Every variable is documented in the README with its default. Nothing else
 * in orloj reads process.env.
 */
export interface Config {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  readonly databaseUrl: string;
  readonly dbPoolSize: number;
  readonly serverHostUrl: string;
  readonly allowedOrigins: readonly string[];
  readonly sameSite: 'Lax' | 'Strict' | 'None';
  readonly secureCookies: boolean;
  readonly sessionTtlMs: number;
  readonly csrfTtlMs: number;
  /** Undefined until resolveSecrets() fills them from the environment or DATA_DIR. */
  readonly sessionSecret: string | undefined;
  readonly csrfSecret: string | undefined;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  readonly rateLimit: {
    readonly enabled: boolean;
    readonly authPerMinute: number;
    readonly authBurst: number;
    readonly apiPerSecond: number;
    readonly apiBurst: number;
  };
  readonly trustedProxies: readonly string[];
}

export type ResolvedConfig = Config & { readonly sessionSecret: string; readonly csrfSecret: string };

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

class Reader {
  readonly problems: string[] = [];
  constructor(private readonly env: Env) {}

  raw(name: string): string | undefined {
    const v = this.env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  }

  string(name: string, fallback: string): string {
    return this.raw(name) ?? fallback;
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const v = this.raw(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!/^\d+$/.test(v) || n < min || n > max) {
      this.problems.push(`${name} must be an integer from ${min} to ${max} (got "${v}")`);
      return fallback;
    }
    return n;
  }

  bool(name: string, fallback: boolean): boolean {
    const v = this.raw(name)?.toLowerCase();
    if (v === undefined) return fallback;
    if (['true', '1', 'yes', 'on'].includes(v)) return true;
    if (['false', '0', 'no', 'off'].includes(v)) return false;
    this.problems.push(`${name} must be true or false (got "${v}")`);
    return fallback;
  }

  duration(name: string, fallback: string): number {
    const v = this.raw(name) ?? fallback;
    const ms = parseDuration(v);
    if (ms === undefined) {
      this.problems.push(`${name} must be a duration such as "7d", "12h" or "30m" (got "${v}")`);
      return parseDuration(fallback)!;
    }
    return ms;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const v = this.raw(name);
    if (v === undefined) return fallback;
    const match = allowed.find((a) => a.toLowerCase() === v.toLowerCase());
    if (!match) this.problems.push(`${name} must be one of ${allowed.join(', ')} (got "${v}")`);
    return match ?? fallback;
  }

  list(name: string): string[] {
    return (this.raw(name) ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  }

  /** A secret from NAME or from the file named by NAME_FILE. */
  secret(name: string): string | undefined {
    const direct = this.raw(name);
    const file = this.raw(`${name}_FILE`);
    if (direct && file) this.problems.push(`set either ${name} or ${name}_FILE, not both`);
    let value = direct;
    if (!value && file) {
      try {
        value = fs.readFileSync(file, 'utf8').trim();
      } catch {
        this.problems.push(`${name}_FILE names a file that cannot be read: ${file}`);
      }
    }
    if (value !== undefined && value.length < 32) this.problems.push(`${name} must be at least 32 characters`);
    return value;
  }
}

function normalizeOrigin(value: string, name: string, problems: string[]): string {
  try {
    const u = new URL(value);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
    return u.origin;
  } catch {
    problems.push(`${name} must hold http(s) origins such as https://orloj.example.com (got "${value}")`);
    return value;
  }
}

export function loadConfig(env: Env = process.env): Config {
  const r = new Reader(env);
  const port = r.int('PORT', 8080, 0, 65535);
  const dataDir = path.resolve(r.string('DATA_DIR', './data'));
  const serverHostUrl = normalizeOrigin(r.string('SERVER_HOST_URL', `http://localhost:${port}`), 'SERVER_HOST_URL', r.problems);
  const sameSite = r.oneOf('SERVER_SAME_SITE_MODE', ['Lax', 'Strict', 'None'] as const, 'Lax');
  const secureCookies = serverHostUrl.startsWith('https:');
  if (sameSite === 'None' && !secureCookies) {
    r.problems.push('SERVER_SAME_SITE_MODE=None needs an https SERVER_HOST_URL (browsers drop such cookies otherwise)');
  }
  const sessionTtlMs = r.duration('SESSION_EXPIRY', '7d');
  const csrfTtlMs = r.duration('CSRF_EXPIRY', '7d');
  if (csrfTtlMs > sessionTtlMs) r.problems.push('CSRF_EXPIRY must not be longer than SESSION_EXPIRY');

  const config: Config = {
    port,
    host: r.string('HOST', '127.0.0.1'),
    dataDir,
    databaseUrl: r.string('DATABASE_URL', `sqlite:${path.join(dataDir, 'orloj.db')}`),
    dbPoolSize: r.int('DB_POOL_SIZE', 10, 1, 1000),
    serverHostUrl,
    allowedOrigins: r.list('SERVER_ALLOWED_ORIGINS').map((o) => normalizeOrigin(o, 'SERVER_ALLOWED_ORIGINS', r.problems)),
    sameSite,
    secureCookies,
    sessionTtlMs,
    csrfTtlMs,
    sessionSecret: r.secret('SESSION_SECRET'),
    csrfSecret: r.secret('CSRF_HMAC_SECRET'),
    logLevel: r.oneOf('LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, 'info'),
    rateLimit: {
      enabled: r.bool('RATE_LIMIT_ENABLED', true),
      authPerMinute: r.int('RATE_LIMIT_AUTH_PER_MINUTE', 10, 1, 1_000_000),
      authBurst: r.int('RATE_LIMIT_AUTH_BURST', 5, 0, 1_000_000),
      apiPerSecond: r.int('RATE_LIMIT_API_PER_SECOND', 20, 1, 1_000_000),
      apiBurst: r.int('RATE_LIMIT_API_BURST', 40, 0, 1_000_000),
    },
    trustedProxies: r.list('TRUSTED_PROXIES'),
  };
  const url = config.databaseUrl;
  if (!url.startsWith('sqlite:') && !url.startsWith('postgres://') && !url.startsWith('postgresql://')) {
    r.problems.push('DATABASE_URL must start with sqlite: or postgres://');
  }
  if (r.problems.length) throw new ConfigError(r.problems);
  return Object.freeze(config);
}

/**
 * Fills missing secrets. The embedded default needs no setup: a secret that is
 * not configured is generated once and kept in DATA_DIR/secrets.json (mode 0600),
 * so sessions survive restarts.
 */
export function resolveSecrets(config: Config): ResolvedConfig {
  if (config.sessionSecret && config.csrfSecret) return config as ResolvedConfig;
  const file = path.join(config.dataDir, 'secrets.json');
  let stored: { sessionSecret?: string; csrfSecret?: string } = {};
  if (fs.existsSync(file)) stored = JSON.parse(fs.readFileSync(file, 'utf8')) as typeof stored;
  const next = {
    sessionSecret: stored.sessionSecret ?? crypto.randomBytes(32).toString('base64url'),
    csrfSecret: stored.csrfSecret ?? crypto.randomBytes(32).toString('base64url'),
  };
  if (next.sessionSecret !== stored.sessionSecret || next.csrfSecret !== stored.csrfSecret) {
    fs.mkdirSync(config.dataDir, { recursive: true });
    fs.writeFileSync(file, JSON.stringify(next, null, 2) + '\n', { mode: 0o600 });
  }
  return Object.freeze({
    ...config,
    sessionSecret: config.sessionSecret ?? next.sessionSecret,
    csrfSecret: config.csrfSecret ?? next.csrfSecret,
  });
}
