/**
 * Which real services a test run may use. scripts/test.sh probes (and under
 * REQUIRE_SERVICES=1 starts) them and exports their URLs. A suite whose
 * service is absent is skipped, or fails when REQUIRE_SERVICES=1.
 */
export const requireServices = process.env.REQUIRE_SERVICES === '1';

export interface ServiceUrls {
  postgres: string | undefined;
  amqp: string | undefined;
  docker: string | undefined;
}

export const services: ServiceUrls = {
  postgres: process.env.TEST_DATABASE_URL || undefined,
  amqp: process.env.TEST_AMQP_URL || undefined,
  docker: process.env.TEST_DOCKER_HOST || undefined,
};

/**
 * Call inside a describe() body's before() hook: skips the suite when the
 * service is not configured, or throws when services are required.
 */
export function needService(ctx: Mocha.Context, name: keyof ServiceUrls): string {
  const url = services[name];
  if (url) return url;
  if (requireServices) throw new Error(`REQUIRE_SERVICES=1 but the ${name} service is not available (set by scripts/test.sh)`);
  ctx.skip();
  throw new Error('unreachable');
}
