import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { deployDir, freePort, needTool } from './tls-servers.js';

export interface Nginx {
  url: string;
  /** `<status> <upstream address>` per request, in order (the test's access log). */
  accessLog(): { uri: string; status: number; upstream: string }[];
  stop(): Promise<void>;
}

/**
 * nginx (the Debian package, installed when missing and we are root) running
 * deploy/nginx/orloj.conf from a scratch directory, its upstream pointed at
 * the given api replicas and its listener at a free port.
 */
export async function startNginx(ctx: Mocha.Context, dir: string, upstreams: string[]): Promise<Nginx> {
  const bin = await needTool(ctx, 'nginx', 'nginx', ['/usr/sbin/nginx']);
  const port = await freePort();
  const shipped = fs.readFileSync(path.join(deployDir, 'nginx', 'orloj.conf'), 'utf8');
  const upstream = /^(\s*)server api:8080( [^;]*)?;$/m;
  if (!upstream.test(shipped) || !/^\s*listen 80;$/m.test(shipped)) throw new Error('deploy/nginx/orloj.conf changed: update the test');
  const conf = shipped
    .replace(upstream, (_m, indent: string, params = '') => upstreams.map((u) => `${indent}server ${u}${params};`).join('\n'))
    .replace(/^(\s*)listen 80;$/m, `$1listen 127.0.0.1:${port};`);
  fs.writeFileSync(path.join(dir, 'orloj.conf'), conf);
  const log = path.join(dir, 'access.log');
  fs.writeFileSync(
    path.join(dir, 'nginx.conf'),
    [
      // as root the workers would otherwise run as nobody, who cannot write the scratch temp dirs
      process.getuid?.() === 0 ? 'user root;' : '',
      'worker_processes 1;',
      `pid ${dir}/nginx.pid;`,
      `error_log ${dir}/error.log warn;`,
      'events { worker_connections 512; }',
      'http {',
      "  log_format upstream '$uri $status $upstream_addr';",
      `  access_log ${log} upstream;`,
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `  ${t}_temp_path ${dir}/${t}_temp;`),
      `  include ${dir}/orloj.conf;`,
      '}',
      '',
    ].join('\n'),
  );
  const child = spawn(bin, ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // up once it accepts connections, or failed once it exits
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nginx exited: ${stderr}`);
    const open = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (open) break;
    if (Date.now() > deadline) throw new Error(`nginx did not listen on ${port}: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50)); // poll interval: nginx announces nothing we can await
  }
  return {
    url: `http://127.0.0.1:${port}`,
    accessLog: () =>
      fs
        .readFileSync(log, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => {
          const [uri = '', status = '0', upstream = '-'] = line.split(' ');
          return { uri, status: Number(status), upstream };
        }),
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
