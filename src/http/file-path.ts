import { p } from './params.js';

/**
 * GitLab's `file_path` parameter validator (lib/api/validations/validators/file_path.rb with
 * Gitlab::PathTraversal): the value is decoded once more; a value that still decodes further
 * (encoded twice), a `..` traversal, a newline or an absolute path is refused with
 * `<param> should be a valid file path`.
 */

const PERCENT = 0x25;
const PLUS = 0x2b;
const SPACE = 0x20;
const isHex = (byte: number | undefined) =>
  byte !== undefined &&
  ((byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66));

/** Ruby's CGI.unescape on bytes: `+` is a space, `%XX` a byte, malformed escapes stay as they are. */
function cgiUnescape(bytes: Buffer): Buffer {
  const out: number[] = [];
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i] as number;
    if (byte === PERCENT && isHex(bytes[i + 1]) && isHex(bytes[i + 2])) {
      out.push(Number.parseInt(String.fromCharCode(bytes[i + 1] as number, bytes[i + 2] as number), 16));
      i += 2;
    } else out.push(byte === PLUS ? SPACE : byte);
  }
  return Buffer.from(out);
}

// Gitlab::PathTraversal::PATH_TRAVERSAL_REGEX_WITH_NEWLINE
const TRAVERSAL = /^\.{1,2}$|^\.\.[/\\]|[/\\]\.\.$|[/\\]\.\.[/\\]|\n/;

/**
 * True when GitLab's validator accepts `value`. `allowEncodedAbsolute` is the raw-file
 * endpoint's `allow_initial_path_separator`: an absolute path is accepted when it arrived still
 * encoded (it then names a file whose name starts with `%2F`, not the root).
 */
export function isValidFilePathParam(value: string, allowEncodedAbsolute = false): boolean {
  const raw = Buffer.from(value, 'utf8');
  const decoded = cgiUnescape(raw);
  if (!decoded.equals(cgiUnescape(decoded))) return false;
  // The patterns are ASCII: reading the bytes as latin1 keeps every byte one character.
  const text = decoded.toString('latin1');
  if (TRAVERSAL.test(text)) return false;
  if (!text.startsWith('/')) return true;
  if (!allowEncodedAbsolute || decoded.equals(raw)) return false;
  const segments = text.split('/');
  while (segments.length > 0 && segments[segments.length - 1] === '') segments.pop();
  return segments.length > 1 && segments[0] === '' && segments[1] !== '';
}

/** The `file_path` parameter as GitLab's routes declare it (`file_path: true`). */
export const filePathParam = (allowEncodedAbsolute = false) =>
  p.string().refine((v) => isValidFilePathParam(v, allowEncodedAbsolute), { message: 'should be a valid file path' });
