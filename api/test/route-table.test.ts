import assert from 'node:assert/strict';
import type Router from '@koa/router';
import { systemClock } from '@orloj/common/core';
import { silentLogger } from '@orloj/common/logging';
import { createTestDatabase, type TestDatabase } from '@orloj/common/test-support';
import { createApp } from '@orloj/api';
import { fill, operations } from './support/conformance.js';
import { testConfig } from './support/harness.js';

/**
 * The router and the OpenAPI document are built from the same declarations
 * (api/src/routes/*.routes.ts); this checks they still agree both ways: every
 * method the router serves on a path is documented there, and every
 * documented operation is one the router has.
 */
describe('route table and OpenAPI document', () => {
  let db: TestDatabase | undefined;
  let router: Router;

  before(async function () {
    db = await createTestDatabase('sqlite', this);
    const app = createApp({ store: db.store, config: testConfig(), clock: systemClock, logger: silentLogger });
    const mounted = app.middleware.find((m) => 'router' in m) as unknown as { router: Router } | undefined;
    assert.ok(mounted, 'the app mounts a router');
    router = mounted.router;
  });
  after(async () => {
    await db?.drop();
  });

  /** Each route the router has: the pattern, and the methods it answers (HEAD comes with GET). */
  const routes = () =>
    router.stack
      .filter((layer) => layer.methods.length > 0)
      .map((layer) => ({ layer, methods: layer.methods.filter((m) => m !== 'HEAD').map((m) => m.toLowerCase()) }));

  it('documents every method the router serves, on the path it serves it', () => {
    const documented = operations();
    let count = 0;
    for (const { layer, methods } of routes()) {
      for (const method of methods) {
        count++;
        const where = `${method.toUpperCase()} ${String(layer.path)}`;
        if (typeof layer.path === 'string') {
          const template = layer.path.replace(/:([A-Za-z_]+)/g, '{$1}');
          assert.ok(documented.some((o) => o.method === method && o.template === template), `${where} is served but not documented`);
        } else {
          // A pattern route: it must answer exactly the documented paths it matches.
          const matching = documented.filter((o) => o.method === method && layer.match(fill(o.template)));
          assert.equal(matching.length, 1, `${where} matches ${matching.length} documented operations`);
        }
      }
    }
    assert.equal(count, documented.length, 'as many routes as documented operations');
  });

  it('serves every documented operation, on a route of its own', () => {
    for (const { template, method } of operations()) {
      const matched = router.match(fill(template), method.toUpperCase());
      const routesFor = matched.pathAndMethod.filter((l) => l.methods.length > 0);
      assert.equal(routesFor.length, 1, `${method.toUpperCase()} ${template}: ${routesFor.length} routes answer it`);
    }
  });
});
