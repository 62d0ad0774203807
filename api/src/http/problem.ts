import type { Context, Middleware } from 'koa';
import { isOrlojError, OrlojError, type ErrorCode, type FieldError } from '@orloj/common/core';
import { MAX_REPORTED_FIELDS } from '@orloj/common/domain';
import type { Logger } from '@orloj/common/logging';

/** The HTTP status of every error code: the one place errors meet HTTP. */
const STATUS: Record<ErrorCode, number> = {
  validation_failed: 400,
  malformed_json: 400,
  unsupported_media_type: 400,
  idempotency_key_missing: 400,
  idempotency_key_invalid: 400,
  job_not_terminal: 400,
  host_not_allowed: 400,
  unauthenticated: 401,
  invalid_credentials: 401,
  csrf_failed: 403,
  forbidden_origin: 403,
  registration_closed: 403,
  invitation_invalid: 403,
  not_found: 404,
  route_not_found: 404,
  method_not_allowed: 405,
  email_taken: 409,
  idempotency_key_reused: 409,
  workflow_limit_reached: 409,
  window_limit_reached: 409,
  workflow_terminated: 412,
  workflow_active: 412,
  workflow_has_running_jobs: 412,
  workflow_build_failed: 412,
  log_retention_disabled: 412,
  body_too_large: 413,
  rate_limited: 429,
  internal_error: 500,
  service_unavailable: 503,
};

const TITLE: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  412: 'Precondition Failed',
  413: 'Content Too Large',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  errors?: FieldError[];
}

/**
 * Bounds of a problem document, whatever the request held: field names come
 * from the request (an unknown key may be megabytes long), so an answer stays
 * a few kilobytes (issue 29).
 */
const MAX_FIELDS = MAX_REPORTED_FIELDS;
const MAX_FIELD_LENGTH = 200;
const MAX_MESSAGE_LENGTH = 500;
const MAX_DETAIL_LENGTH = 1000;

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

export function problemOf(error: OrlojError): ProblemDocument {
  const status = STATUS[error.code];
  const fields = error.fields?.slice(0, MAX_FIELDS).map((f) => ({ field: clip(f.field, MAX_FIELD_LENGTH), message: clip(f.message, MAX_MESSAGE_LENGTH) }));
  return {
    type: `urn:orloj:problem:${error.code}`,
    title: TITLE[status] ?? 'Error',
    status,
    detail: clip(error.message, MAX_DETAIL_LENGTH),
    code: error.code,
    ...(fields?.length ? { errors: fields } : {}),
  };
}

export function sendProblem(ctx: Context, error: OrlojError): void {
  const problem = problemOf(error);
  ctx.status = problem.status;
  ctx.type = 'application/problem+json';
  ctx.body = JSON.stringify(problem);
}

/** Headers an error may carry to the client (e.g. Retry-After, Allow). */
export class HttpHeaders {
  static readonly key = Symbol('orloj.headers');
}

export function withHeaders(error: OrlojError, headers: Record<string, string>): OrlojError {
  (error as unknown as Record<symbol, unknown>)[HttpHeaders.key] = headers;
  return error;
}

/**
 * Mounted first: turns every thrown error into a problem document. Unknown
 * errors become a bare 500 with no detail (logged with the request id).
 */
export function errorMiddleware(logger: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      let error: OrlojError;
      if (isOrlojError(err)) {
        error = err;
      } else if (isHttpError(err) && err.status === 413) {
        error = new OrlojError('body_too_large', 'The request body exceeds the 4 MiB limit.');
      } else if (isHttpError(err) && err.status === 400 && err.expose) {
        error = new OrlojError('validation_failed', 'The request could not be read.');
      } else {
        logger.error({ err, reqId: ctx.state.reqId as string | undefined, path: ctx.path }, 'unhandled error');
        error = new OrlojError('internal_error', 'Something went wrong on our side.', { kind: 'unexpected' });
      }
      const headers = (error as unknown as Record<symbol, Record<string, string> | undefined>)[HttpHeaders.key];
      if (headers) ctx.set(headers);
      sendProblem(ctx, error);
    }
  };
}

function isHttpError(e: unknown): e is { status: number; expose: boolean } {
  return typeof e === 'object' && e !== null && typeof (e as { status?: unknown }).status === 'number';
}
