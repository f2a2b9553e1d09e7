const MAX_INT4 = 2147483647;

/** A database id from user input, or null when it cannot name a row (too large, not positive). */
export function toDbId(value: string | number): number | null {
  const n = typeof value === 'number' ? value : /^\d+$/.test(value) ? Number(value) : Number.NaN;
  return Number.isInteger(n) && n >= 1 && n <= MAX_INT4 ? n : null;
}
