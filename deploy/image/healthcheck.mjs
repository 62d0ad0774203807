// The image's HEALTHCHECK: exit 0 when this container's orloj answers its readiness
// probe. A process with the api role serves GET /readyz on PORT; every other role
// serves it on OPS_PORT. A refused connection on PORT means "no api here": try OPS_PORT.
// Uses the same variables, with the same defaults, as orloj itself (README, Configuration).
/* global process, console */
import http from 'node:http';

const port = (name, fallback) => Number(process.env[name]?.trim() || fallback);

function probe(p) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port: p, path: '/readyz', timeout: 4000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200 ? 'ready' : `HTTP ${res.statusCode}`);
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (err) => resolve(err.code === 'ECONNREFUSED' ? 'refused' : err.message));
  });
}

let result = await probe(port('PORT', 8080));
if (result === 'refused') result = await probe(port('OPS_PORT', 9464));
// eslint-disable-next-line no-console -- the reason shows in the container's health log
if (result !== 'ready') console.error(`orloj is not ready: ${result}`);
process.exit(result === 'ready' ? 0 : 1);
