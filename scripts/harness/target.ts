// The local HTTP target the seeded HEARTBEAT workflows check: it counts the
// requests, answers 500 at the run's fail rate and may take its time.
import http from 'node:http';

export interface Target {
  url: string;
  requests: number;
  failures: number;
  close(): Promise<void>;
}

/**
 * Answers 200, or 500 at failRate; after delayMs real time on average
 * (uniform from half to one and a half times it), so jobs stay RUNNING a while.
 */
export async function startTarget(failRate: number, delayMs = 0): Promise<Target> {
  const target: Target = { url: '', requests: 0, failures: 0, close: async () => undefined };
  const server = http.createServer((req, res) => {
    target.requests += 1;
    req.resume();
    const fail = Math.random() < failRate;
    if (fail) target.failures += 1;
    const answer = () => {
      res.writeHead(fail ? 500 : 200, { 'content-type': 'text/plain' });
      res.end(fail ? 'chaos says no\n' : 'ok\n');
    };
    if (delayMs > 0) setTimeout(answer, delayMs * (0.5 + Math.random()));
    else answer();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the target has no TCP address');
  target.url = `http://127.0.0.1:${address.port}`;
  target.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return target;
}
