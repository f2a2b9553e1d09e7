import { transliterate } from './transliterate.js';

/**
 * `Content-Disposition` values as Rails' ActionDispatch::Http::ContentDisposition.format writes
 * them, which GitLab uses for raw files and downloads: `inline; filename="<ascii>";
 * filename*=UTF-8''<percent-encoded UTF-8>`.
 */

// Characters Rails leaves alone in each form; everything else is percent-encoded byte by byte.
const TRADITIONAL_ESCAPED = /[^ A-Za-z0-9!#$+.^_`|~-]/gu;
const RFC5987_ESCAPED = /[^A-Za-z0-9!#$&+.^_`|~-]/gu;

const percentEscape = (text: string, pattern: RegExp) =>
  text.replace(pattern, (char) =>
    [...Buffer.from(char, 'utf8')].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''),
  );

/** `<disposition>; filename="…"; filename*=UTF-8''…`, or the bare disposition without a name. */
export function formatContentDisposition(disposition: 'inline' | 'attachment', filename?: string | null): string {
  if (!filename) return disposition;
  const ascii = percentEscape(transliterate(filename), TRADITIONAL_ESCAPED);
  const utf8 = percentEscape(filename, RFC5987_ESCAPED);
  return `${disposition}; filename="${ascii}"; filename*=UTF-8''${utf8}`;
}
