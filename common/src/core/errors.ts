/**
 * The one error type every package throws on purpose. `code` is stable and
 * machine-readable; the api maps it to an HTTP status in exactly one place.
 *
 * kind:
 *  - user: the caller asked for something invalid or not allowed (4xx)
 *  - operational: a dependency failed in an expected way (5xx, retryable)
 *  - unexpected: a bug; never shown to users in detail
 */
export type ErrorKind = 'user' | 'operational' | 'unexpected';

export interface FieldError {
  field: string;
  message: string;
}

export type ErrorCode =
  | 'validation_failed'
  | 'malformed_json'
  | 'unsupported_media_type'
  | 'body_too_large'
  | 'idempotency_key_missing'
  | 'idempotency_key_invalid'
  | 'idempotency_key_reused'
  | 'unauthenticated'
  | 'invalid_credentials'
  | 'csrf_failed'
  | 'forbidden_origin'
  | 'registration_closed'
  | 'invitation_invalid'
  | 'host_not_allowed'
  | 'email_taken'
  | 'not_found'
  | 'route_not_found'
  | 'method_not_allowed'
  | 'workflow_terminated'
  | 'workflow_active'
  | 'workflow_has_running_jobs'
  | 'workflow_build_failed'
  | 'workflow_limit_reached'
  | 'window_limit_reached'
  | 'log_retention_disabled'
  | 'job_not_terminal'
  | 'rate_limited'
  | 'service_unavailable'
  | 'internal_error';

export class OrlojError extends Error {
  readonly code: ErrorCode;
  readonly kind: ErrorKind;
  readonly fields: readonly FieldError[] | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    options: { kind?: ErrorKind; fields?: FieldError[]; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'OrlojError';
    this.code = code;
    this.kind = options.kind ?? 'user';
    this.fields = options.fields;
  }
}

export function validationError(fields: FieldError[], message = 'The request is invalid.'): OrlojError {
  return new OrlojError('validation_failed', message, { fields });
}

export function notFound(what: string): OrlojError {
  return new OrlojError('not_found', `${what} was not found.`);
}

export function isOrlojError(e: unknown): e is OrlojError {
  return e instanceof OrlojError;
}
