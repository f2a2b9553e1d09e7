/**
 * git's `version:refname` order (versioncmp.c, glibc's strverscmp), which Gitaly uses for
 * GitLab's `order_by=version`: digit runs compare as numbers, and a run with leading zeros is
 * a fraction (`1.09` < `1.1`). No `versionsort.suffix` is configured, as in Depot's git.
 */

// States: normal, integral part, fractional part, leading zeros (each a multiple of 3).
const S_N = 0;
const S_I = 3;
const S_F = 6;
const S_Z = 9;
const CMP = 2;
const LEN = 3;

// Indexed by state + class of the character (0: other, 1: digit 1-9, 2: '0').
const NEXT_STATE = [S_N, S_I, S_Z, S_N, S_I, S_I, S_N, S_F, S_F, S_N, S_F, S_Z];

// Indexed by state * 3 + class of the second string's character.
// biome-ignore format: one row per state
const RESULT_TYPE = [
  CMP, CMP, CMP, CMP, LEN, CMP, CMP, CMP, CMP,
  CMP, -1, -1, +1, LEN, LEN, +1, LEN, LEN,
  CMP, CMP, CMP, CMP, CMP, CMP, CMP, CMP, CMP,
  CMP, +1, +1, -1, CMP, CMP, -1, CMP, CMP,
];

const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const charClass = (c: number) => (c === 0x30 ? 1 : 0) + (isDigit(c) ? 1 : 0);

/** Negative, zero or positive as git's versioncmp orders `a` and `b` (compared as UTF-8 bytes). */
export function versionCompare(a: string, b: string): number {
  // A trailing 0 byte plays the part of C's string terminator.
  const s1 = Buffer.concat([Buffer.from(a, 'utf8'), Buffer.from([0])]);
  const s2 = Buffer.concat([Buffer.from(b, 'utf8'), Buffer.from([0])]);
  let i = 0;
  let c1 = s1[i] as number;
  let c2 = s2[i] as number;
  i++;
  let state = S_N + charClass(c1);
  let diff = c1 - c2;
  while (diff === 0) {
    if (c1 === 0) return 0;
    state = NEXT_STATE[state] as number;
    c1 = s1[i] as number;
    c2 = s2[i] as number;
    i++;
    state += charClass(c1);
    diff = c1 - c2;
  }
  const result = RESULT_TYPE[state * 3 + charClass(c2)] as number;
  if (result === CMP) return diff;
  if (result !== LEN) return result;
  // Both in a digit run: the longer run is the larger number.
  let k = i;
  while (isDigit(s1[k] ?? 0)) {
    if (!isDigit(s2[k] ?? 0)) return 1;
    k++;
  }
  return isDigit(s2[k] ?? 0) ? -1 : diff;
}
