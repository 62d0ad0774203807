import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { ApiDeps } from '../deps.js';
import { heavyRequest } from '../http/heavy-requests.js';
import { requireOwnOrigin, requireSession } from '../http/session.js';

/**
 * One HTTP operation as its resource file declares it: the router mounts it
 * and the OpenAPI document (openapi.ts) describes it from this one object.
 */
export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

/**
 * `session`: the session cookie, and on a method that changes state the CSRF
 * cookie and the Origin rule too; `origin`: the Origin rule alone (no session
 * yet: register, login); `public`: anyone.
 */
export type Access = 'session' | 'origin' | 'public';

export interface Parameter {
  readonly name: string;
  readonly in: 'query' | 'header';
  readonly required?: boolean;
  readonly description?: string;
  readonly schema: object;
}

export interface ResponseObject {
  readonly description: string;
  readonly headers?: object;
  readonly content?: object;
}

export interface Operation {
  readonly method: Method;
  /** The OpenAPI path template (`{name}` parameters, each a UUID); the router's path is the same with `:name`. */
  readonly path: string;
  /** The router's pattern, where the template would match more than this operation's paths. */
  readonly route?: RegExp;
  readonly summary: string;
  readonly description?: string;
  readonly access: Access;
  /** Takes one of the process's places for requests with large answers before the handler runs. */
  readonly heavy?: boolean;
  /** Counted by the login rate limit (per address) rather than the general one. */
  readonly authRateLimited?: boolean;
  /** Query and header parameters (path parameters come from the template). */
  readonly parameters?: readonly Parameter[];
  readonly body?: { readonly schema: object; readonly required: boolean };
  /** The operation's own responses; those every operation of its kind gives are added (openapi.ts). */
  readonly responses: Readonly<Record<string, ResponseObject>>;
  readonly handler: (deps: ApiDeps, ctx: Context) => Promise<void> | void;
}

/** The path parameters of a template, in order. */
export function pathParameters(template: string): string[] {
  return [...template.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
}

/** Mounts each operation on the router, behind the checks its declaration asks for. */
export function mountOperations(router: Router, operations: readonly Operation[], deps: ApiDeps): void {
  const access: Record<Access, Middleware[]> = {
    session: [requireSession(deps.sessions, deps.config)],
    origin: [requireOwnOrigin(deps.config)],
    public: [],
  };
  const heavy = heavyRequest(deps.heavy);
  for (const op of operations) {
    const middleware: Middleware[] = [...access[op.access], ...(op.heavy ? [heavy] : []), (ctx) => op.handler(deps, ctx)];
    const path = op.route ?? op.path.replace(/\{([^}]+)\}/g, ':$1');
    (router[op.method] as (path: string | RegExp, ...middleware: Middleware[]) => Router).call(router, path, ...middleware);
  }
}
