import { RE2JS } from 're2js';
import { ApiError } from '../http/errors.js';

const escapeRegex = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * GitLab's ref search (GitRefsFinder): a case-insensitive substring match, where `^` and `$`
 * anchor and `*` matches anything; without those, an exact match comes first.
 */
export function searchRefs<T extends { name: string }>(refs: T[], term: string): T[] {
  const lower = term.toLowerCase();
  const regexSearch = /[\^$*]/.test(lower);
  let pattern = escapeRegex(lower);
  if (regexSearch) {
    pattern = pattern.replace('\\^', '^').replace('\\$', '$').replace(/\\\*/g, '.*?');
  }
  const re = new RegExp(pattern);
  const found = refs.filter((r) => re.test(r.name.toLowerCase()));
  if (regexSearch) return found;
  const exact = found.filter((r) => r.name.toLowerCase() === lower);
  return [...exact, ...found.filter((r) => r.name.toLowerCase() !== lower)];
}

/** GitLab's `regex` filter: RE2 semantics (linear time, no backtracking); invalid → 400. */
export function filterByRegex<T extends { name: string }>(refs: T[], regex: string): T[] {
  let compiled: RE2JS;
  try {
    compiled = RE2JS.compile(regex);
  } catch {
    throw new ApiError(400, { message: 'Regex is invalid' });
  }
  return refs.filter((r) => compiled.matcher(r.name).find());
}
