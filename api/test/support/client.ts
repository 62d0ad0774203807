import { request } from 'undici';

export interface HttpResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The parsed JSON body (undefined when empty or not JSON). */
  json: any;
  setCookies: string[];
}

export interface RequestOptions {
  body?: unknown;
  /** Sent as-is instead of JSON-encoding `body`. */
  rawBody?: string | Buffer;
  headers?: Record<string, string | string[]>;
  /** Skip the cookie jar for this request. */
  noCookies?: boolean;
}

/**
 * A small HTTP client with a cookie jar, as a browser would keep one. It
 * talks to a real listening server over TCP.
 */
export class TestClient {
  readonly cookies = new Map<string, string>();

  constructor(readonly baseUrl: string) {}

  cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  async send(method: string, path: string, options: RequestOptions = {}): Promise<HttpResponse> {
    const headers: Record<string, string | string[]> = { ...(options.headers ?? {}) };
    let body: string | Buffer | undefined = options.rawBody;
    if (body === undefined && options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    if (!options.noCookies && this.cookies.size && headers.cookie === undefined) headers.cookie = this.cookieHeader();
    const res = await request(this.baseUrl + path, { method: method as 'GET', headers, body });
    const text = await res.body.text();
    const raw = res.headers['set-cookie'];
    const setCookies = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
    if (!options.noCookies) {
      for (const c of setCookies) {
        const [pair, ...attrs] = c.split(';');
        const eq = pair!.indexOf('=');
        const name = pair!.slice(0, eq).trim();
        const value = pair!.slice(eq + 1).trim();
        if (attrs.some((a) => /^\s*max-age=0$/i.test(a))) this.cookies.delete(name);
        else this.cookies.set(name, value);
      }
    }
    let json: any;
    const type = String(res.headers['content-type'] ?? '');
    if (text && type.includes('json') && !type.includes('ndjson')) json = JSON.parse(text);
    return { status: res.statusCode, headers: res.headers, text, json, setCookies };
  }

  get(path: string, options?: RequestOptions) {
    return this.send('GET', path, options);
  }
  post(path: string, body?: unknown, options: RequestOptions = {}) {
    return this.send('POST', path, { ...options, body });
  }
  put(path: string, body?: unknown, options: RequestOptions = {}) {
    return this.send('PUT', path, { ...options, body });
  }
  patch(path: string, options?: RequestOptions) {
    return this.send('PATCH', path, options);
  }
  delete(path: string, options?: RequestOptions) {
    return this.send('DELETE', path, options);
  }

  /** A new client holding copies of this one's cookies. */
  clone(): TestClient {
    const c = new TestClient(this.baseUrl);
    for (const [k, v] of this.cookies) c.cookies.set(k, v);
    return c;
  }
}

/**
 * Sends hand-written request bytes over a raw socket, for headers a
 * well-behaved client refuses to send (control characters, invalid UTF-8).
 * Returns the status code, the header block and the body text.
 */
export async function rawRequest(baseUrl: string, head: Buffer, body: Buffer = Buffer.alloc(0)): Promise<{ status: number; head: string; body: string }> {
  const { port, hostname } = new URL(baseUrl);
  const net = await import('node:net');
  return new Promise((resolve, reject) => {
    // Written without a half-close: Node's server drops requests whose client already sent FIN.
    const socket = net.connect(Number(port), hostname, () => socket.write(Buffer.concat([head, body])));
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      const end = text.indexOf('\r\n\r\n');
      resolve({ status, head: text.slice(0, end), body: text.slice(end + 4) });
    });
  });
}
