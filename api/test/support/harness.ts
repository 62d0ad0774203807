import crypto from 'node:crypto';
import { systemClock, type Clock } from '@orloj/common/core';
import { loadConfig, resolveSecrets, type ResolvedConfig } from '@orloj/common/config';
import { silentLogger } from '@orloj/common/logging';
import type { SignedBus } from '@orloj/common/envelope';
import { ApiServer, type LiveTailSettings } from '@orloj/api';
import { describeEachEngine, type Engine, type TestDatabase } from '@orloj/common/test-support';
import { TestClient } from './client.js';

export interface ApiHarness {
  db: TestDatabase;
  config: ResolvedConfig;
  baseUrl: string;
  /** A client that is not signed in. */
  client(): TestClient;
  /** A client signed in as a fresh user. */
  user(): Promise<TestClient & { email: string }>;
}

export const JSON_HEADERS = { 'content-type': 'application/json' };

let counter = 0;
export function uniqueEmail(): string {
  return `user${++counter}-${crypto.randomBytes(4).toString('hex')}@example.com`;
}

export function testConfig(env: Record<string, string> = {}): ResolvedConfig {
  return resolveSecrets(
    loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: '/nonexistent-not-used',
      RATE_LIMIT_ENABLED: 'false',
      // The test images are built locally (localhost/orloj-test/…): allowed explicitly, like an operator would.
      CONTAINER_REGISTRIES: 'docker.io,localhost',
      SESSION_SECRET: 'test-session-secret-0123456789abcdef0123456789',
      CSRF_HMAC_SECRET: 'test-csrf-secret-0123456789abcdef0123456789abc',
      ...env,
    }),
  );
}

/**
 * A real api server (HTTP on an ephemeral port) over a fresh database, once
 * per engine. `env` adjusts the configuration (e.g. turns rate limits on).
 */
export function describeApi(
  title: string,
  body: (h: () => ApiHarness, engine: Engine) => void,
  options: {
    env?: Record<string, string>;
    clock?: Clock;
    /** Live tail timings (tests shorten them). */
    liveTail?: Partial<LiveTailSettings>;
    /** The api role's bus, built once the test's hooks have run. */
    bus?: () => SignedBus;
  } = {},
): void {
  describeEachEngine(title, (db, engine) => {
    let harness: ApiHarness | undefined;
    let server: ApiServer | undefined;
    before(async () => {
      const config = testConfig(options.env);
      server = new ApiServer({
        store: db().store,
        config,
        clock: options.clock ?? systemClock,
        logger: silentLogger,
        bus: options.bus?.(),
        liveTail: options.liveTail,
      });
      const address = await server.start();
      const baseUrl = `http://127.0.0.1:${address.port}`;
      harness = {
        db: db(),
        config,
        baseUrl,
        client: () => new TestClient(baseUrl),
        async user() {
          const c = new TestClient(baseUrl) as TestClient & { email: string };
          c.email = uniqueEmail();
          const res = await c.post('/auth/register', { email: c.email, password: 'correct horse' });
          if (res.status !== 201) throw new Error(`register failed: ${res.status} ${res.text}`);
          return c;
        },
      };
    });
    after(async () => {
      await server?.stop();
    });
    body(() => {
      if (!harness) throw new Error('harness not ready');
      return harness;
    }, engine);
  });
}

export function workflowBody(overrides: Record<string, unknown> = {}) {
  return {
    name: 'Homepage check',
    payload: JSON.stringify({ endpoint: 'https://example.com/health' }),
    kind: 'HEARTBEAT',
    interval: 5,
    max_consecutive_job_failures_allowed: 3,
    ...overrides,
  };
}

export function key(): Record<string, string> {
  return { 'idempotency-key': crypto.randomUUID() };
}
