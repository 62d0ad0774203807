import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger, lazyChild, RequestContext } from '@orloj/common/logging';
import { duplicateKeys, jsonLines } from './support/json-lines.js';
import { recordingLogger } from './support/logger.js';

describe('lazyChild', () => {
  it('writes lines at enabled levels with the bindings, as a child would', async () => {
    const { logger, lines } = recordingLogger('info');
    const log = lazyChild(logger, { jobId: 'j1' });
    log.info({ kind: 'HEARTBEAT' }, 'job started');
    log.warn('plain message');
    log.debug({ hidden: true }, 'not at info');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(
      lines.map((l) => [l.level, l.jobId, l.kind, l.msg]),
      [
        [30, 'j1', 'HEARTBEAT', 'job started'],
        [40, 'j1', undefined, 'plain message'],
      ],
    );
  });

  it('makes no child while nothing it is asked to write is enabled', () => {
    const { logger } = recordingLogger('warn');
    let children = 0;
    const child = logger.child.bind(logger);
    logger.child = ((...args: Parameters<typeof child>) => (children++, child(...args))) as typeof logger.child;
    const log = lazyChild(logger, { jobId: 'j2' });
    log.info('dropped');
    log.debug({ a: 1 }, 'dropped');
    assert.equal(children, 0);
    log.error('kept');
    log.error('kept again');
    assert.equal(children, 1);
  });
});

describe('request context in log lines', () => {
  function captureRoot(context: RequestContext) {
    const raw: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString('utf8').split('\n')) if (l) raw.push(l);
        done();
      },
    });
    return { logger: createLogger({ level: 'info', context, destination: sink }), raw };
  }

  it('adds the request id to every line written for the request, across awaits, and only there', async () => {
    const context = new RequestContext();
    const { logger, raw } = captureRoot(context);
    const child = logger.child({ role: 'api' });
    await context.run('req-1', async () => {
      child.info('first');
      await new Promise((r) => setTimeout(r, 5)); // a timer turn between the two lines: the request context must survive it
      child.warn({ reqId: 'req-1', extra: 1 }, 'explicit id too');
    });
    child.info('outside');
    await new Promise((r) => setImmediate(r));
    const lines = jsonLines(raw.join('\n'));
    assert.deepEqual(
      lines.map((l) => [l.msg, l.reqId, l.role]),
      [
        ['first', 'req-1', 'api'],
        ['explicit id too', 'req-1', 'api'],
        ['outside', undefined, 'api'],
      ],
    );
  });

  it('finds duplicate keys that JSON.parse would hide', () => {
    assert.deepEqual(duplicateKeys('{"a":1,"role":"x","n":{"role":2},"role":"y"}'), ['role']);
    assert.deepEqual(duplicateKeys('{"a":"\\"role\\":","b":[{"a":1}]}'), []);
  });
});
