/**
 * Checks on the numeric options a unit is built with (tests and embedding
 * pass them; loadConfig has checked what comes from the environment). A bad
 * one is a programming error, thrown as a RangeError naming the option.
 */
export function positiveInt(name: string, value: number, max = Number.MAX_SAFE_INTEGER): number {
  if (Number.isSafeInteger(value) && value >= 1 && value <= max) return value;
  throw new RangeError(max === Number.MAX_SAFE_INTEGER ? `${name} must be a positive integer, got ${value}` : `${name} must be an integer from 1 to ${max}, got ${value}`);
}

export function nonNegativeInt(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name} must be a non-negative integer, got ${value}`);
  return value;
}
