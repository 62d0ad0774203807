import { REASON_CODES, type JobReason, type ReasonCode } from '../domain/job.js';

/** Small checks the decoders beside each message type share. */

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A job, workflow or runner id as messages carry it. */
export function isId(value: unknown): value is string {
  return typeof value === 'string' && value !== '' && value.length <= 200;
}

export function isPositiveInt(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) > 0;
}

export function isInt(value: unknown): value is number {
  return Number.isSafeInteger(value);
}

function isReasonCode(value: unknown): value is ReasonCode {
  return typeof value === 'string' && (REASON_CODES as readonly string[]).includes(value);
}

/** A reason as messages carry it; undefined when absent or unusable (the consumer's default applies then). */
export function readReason(value: unknown): JobReason | undefined {
  return isRecord(value) && isReasonCode(value.code) && typeof value.message === 'string' && value.message !== ''
    ? { code: value.code, message: value.message }
    : undefined;
}
