import crypto from 'node:crypto';
import { sealData, unsealData } from 'iron-session';
import { serialize } from 'cookie';
import type { Context, Middleware } from 'koa';
import { newId, OrlojError, type Clock } from '@orloj/common/core';
import type { ResolvedConfig } from '@orloj/common/config';
import type { ActiveSession, Store } from '@orloj/common/store';

export const SESSION_COOKIE = 'session';
export const CSRF_COOKIE = 'csrf';

export interface SessionState {
  id: string;
  userId: string;
  createdAt: number;
  expiresAt: number;
}

interface SealedSession {
  sid: string;
}

/**
 * Browser sessions: the `session` cookie is an iron-session seal of a session
 * id whose row in the store lets logout and expiry revoke it; the `csrf`
 * cookie is an HMAC over that session id and an issue time, so it is bound to
 * one session and has its own expiry.
 */
export class SessionManager {
  /** Unsealing costs ~0.5 ms of crypto; a seal always opens to the same id, so opened seals are remembered. */
  private readonly opened = new Map<string, string>();
  private static readonly MAX_OPENED = 10_000;
  /** How far in the future a CSRF token's issue time may lie (clock skew between replicas). */
  private static readonly CSRF_FUTURE_SKEW_MS = 60_000;

  constructor(
    private readonly store: Store,
    private readonly config: ResolvedConfig,
    private readonly clock: Clock,
  ) {}

  /** Starts a session for the user and sets both cookies on the response. */
  async begin(ctx: Context, userId: string, tx: Store = this.store): Promise<SessionState> {
    const now = this.clock.now();
    const session: SessionState = { id: newId(), userId, createdAt: now, expiresAt: now + this.config.sessionTtlMs };
    await tx.sessions.insert(session);
    const sealed = await sealData({ sid: session.id } satisfies SealedSession, {
      password: this.config.sessionSecret,
      ttl: Math.ceil(this.config.sessionTtlMs / 1000),
    });
    this.setCookie(ctx, SESSION_COOKIE, sealed, this.config.sessionTtlMs);
    this.setCookie(ctx, CSRF_COOKIE, this.csrfToken(session.id, now), Math.min(this.config.csrfTtlMs, this.config.sessionTtlMs));
    return session;
  }

  /** The active session named by the request's cookie, or undefined. */
  async current(ctx: Context): Promise<ActiveSession | undefined> {
    const cached = ctx.state.session as ActiveSession | undefined;
    if (cached) return cached;
    const sealed = ctx.cookies.get(SESSION_COOKIE);
    if (!sealed || sealed.length > 4096) return undefined;
    const sid = this.opened.get(sealed) ?? (await this.unseal(sealed));
    if (sid === undefined) return undefined;
    // The row decides: revoked or expired sessions stop working at once, cached seal or not.
    const row = await this.store.sessions.findActive(sid, this.clock.now()).catch(() => undefined);
    if (!row) return undefined;
    ctx.state.session = row;
    return row;
  }

  private async unseal(sealed: string): Promise<string | undefined> {
    let data: Partial<SealedSession>;
    try {
      data = await unsealData<SealedSession>(sealed, {
        password: this.config.sessionSecret,
        ttl: Math.ceil(this.config.sessionTtlMs / 1000),
      });
    } catch {
      return undefined;
    }
    if (typeof data.sid !== 'string') return undefined;
    if (this.opened.size >= SessionManager.MAX_OPENED) this.opened.delete(this.opened.keys().next().value!);
    this.opened.set(sealed, data.sid);
    return data.sid;
  }

  async end(ctx: Context, session: SessionState): Promise<void> {
    await this.store.sessions.revoke(session.id, this.clock.now());
    this.clearCookies(ctx);
  }

  clearCookies(ctx: Context): void {
    this.setCookie(ctx, SESSION_COOKIE, '', 0);
    this.setCookie(ctx, CSRF_COOKIE, '', 0);
  }

  csrfToken(sessionId: string, issuedAt: number): string {
    return `${issuedAt}.${this.csrfMac(sessionId, issuedAt)}`;
  }

  /** Whether a CSRF value was issued for this session and has not expired. */
  csrfValid(value: string | undefined, session: SessionState): boolean {
    if (!value) return false;
    const match = /^(\d{1,15})\.([A-Za-z0-9_-]{43})$/.exec(value);
    if (!match) return false;
    const issuedAt = Number(match[1]);
    const now = this.clock.now();
    if (issuedAt < session.createdAt || issuedAt > now + SessionManager.CSRF_FUTURE_SKEW_MS || now >= issuedAt + this.config.csrfTtlMs) return false;
    const expected = Buffer.from(this.csrfMac(session.id, issuedAt));
    const given = Buffer.from(match[2]!);
    return expected.length === given.length && crypto.timingSafeEqual(expected, given);
  }

  private csrfMac(sessionId: string, issuedAt: number): string {
    return crypto.createHmac('sha256', this.config.csrfSecret).update(`${sessionId}.${issuedAt}`).digest('base64url');
  }

  private setCookie(ctx: Context, name: string, value: string, maxAgeMs: number): void {
    ctx.append(
      'Set-Cookie',
      serialize(name, value, {
        path: '/',
        httpOnly: true,
        sameSite: this.config.sameSite.toLowerCase() as 'lax' | 'strict' | 'none',
        secure: this.config.secureCookies,
        maxAge: Math.floor(maxAgeMs / 1000),
      }),
    );
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The Origin rule of mutating requests: one carrying `Origin` must come from
 * the service's own origin (SERVER_HOST_URL, or the request's own host — which
 * the host check has already limited to served names) or from
 * SERVER_ALLOWED_ORIGINS; one marked `Sec-Fetch-Site: cross-site` without an
 * origin is refused, and so is `Origin: null` unless the browser says
 * `Sec-Fetch-Site: same-origin`. Throws 403 `forbidden_origin`.
 */
export function originChecker(config: Pick<ResolvedConfig, 'serverHostUrl' | 'allowedOrigins'>): (ctx: Context) => void {
  const ownOrigins = new Set([config.serverHostUrl, ...config.allowedOrigins]);
  return (ctx) => {
    const origin = ctx.get('Origin');
    if (origin && origin !== 'null' && !ownOrigins.has(origin) && origin !== `${ctx.protocol}://${ctx.host}`) {
      throw new OrlojError('forbidden_origin', 'Requests from this origin are not allowed.');
    }
    const site = ctx.get('Sec-Fetch-Site');
    if (!origin && site === 'cross-site') throw new OrlojError('forbidden_origin', 'Cross-site requests are not allowed.');
    // An opaque origin (a sandboxed frame, a data: or file: page, a form re-posted across a
    // redirect) can be anyone's page: only a browser vouching for its own origin is believed.
    if (origin === 'null' && site !== 'same-origin') throw new OrlojError('forbidden_origin', 'Requests from an opaque origin (Origin: null) are not allowed.');
  };
}

/** The Origin rule alone, for the mutating routes that need no session (register, login). */
export function requireOwnOrigin(config: Pick<ResolvedConfig, 'serverHostUrl' | 'allowedOrigins'>): Middleware {
  const checkOrigin = originChecker(config);
  return async (ctx, next) => {
    checkOrigin(ctx);
    await next();
  };
}

/**
 * Requires a valid session (401 otherwise) and, on mutating methods, a valid
 * session-bound CSRF cookie plus an acceptable Origin (403 otherwise).
 */
export function requireSession(sessions: SessionManager, config: ResolvedConfig): Middleware {
  const checkOrigin = originChecker(config);
  return async (ctx, next) => {
    const session = await sessions.current(ctx);
    if (!session) {
      // A stale cookie is cleared so the browser stops sending it.
      if (ctx.cookies.get(SESSION_COOKIE)) sessions.clearCookies(ctx);
      throw new OrlojError('unauthenticated', 'Sign in to continue: the session is missing, expired or revoked.');
    }
    if (!SAFE_METHODS.has(ctx.method)) {
      checkOrigin(ctx);
      const csrf = ctx.cookies.get(CSRF_COOKIE);
      const header = ctx.get('X-CSRF-Token');
      if (!sessions.csrfValid(csrf, session) || (header !== '' && header !== csrf)) {
        throw new OrlojError('csrf_failed', 'The CSRF token is missing, expired or does not belong to this session.');
      }
    }
    await next();
  };
}
