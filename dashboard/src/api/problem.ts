/** An RFC 9457 problem document as the api sends it (`errors` on validation failures). */
export interface Problem {
  type?: string;
  title?: string;
  status: number;
  detail?: string;
  code?: string;
  errors?: { field: string; message: string }[];
}

/** A request the api refused (problem details), or one that never got an answer (status 0). */
export class ApiError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.detail || problem.title || `The request failed (HTTP ${problem.status}).`);
    this.name = 'ApiError';
  }

  get status(): number {
    return this.problem.status;
  }

  get code(): string | undefined {
    return this.problem.code;
  }

  /** Whether sending the very same request again may succeed (so an Idempotency-Key should be kept). */
  get retryable(): boolean {
    return this.status === 0 || this.status === 429 || this.status >= 500;
  }

  /** Field errors by field name (`name`, `payload.endpoint`, …), messages of one field joined. */
  fieldErrors(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const e of this.problem.errors ?? []) out[e.field] = out[e.field] ? `${out[e.field]}; ${e.message}` : e.message;
    return out;
  }
}

function isProblem(value: unknown): value is Problem {
  return typeof value === 'object' && value !== null && typeof (value as Problem).status === 'number';
}

/** The ApiError for a failed response and whatever body openapi-fetch or fetch parsed from it. */
export function toApiError(response: Response, body: unknown): ApiError {
  if (isProblem(body)) return new ApiError(body);
  return new ApiError({ status: response.status, title: response.statusText || undefined });
}

/** A fetch that threw (offline, server down) as an ApiError with status 0. */
export function networkError(): ApiError {
  return new ApiError({ status: 0, title: 'The server cannot be reached. Check your connection and try again.' });
}

/** A message for any error a query or mutation may throw. */
export function messageOf(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof Error) return error.message;
  return 'Something went wrong.';
}
