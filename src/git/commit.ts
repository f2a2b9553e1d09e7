/** Commits as the engine hands them out, parsed from raw objects or from `git log`. */

export interface Signature {
  name: string;
  email: string;
  /** Seconds since the epoch. */
  time: number;
  /** Offset from UTC in minutes, as recorded in the commit. */
  tzMinutes: number;
}

export interface Commit {
  id: string;
  tree: string;
  parentIds: string[];
  author: Signature;
  committer: Signature;
  /** The whole message as stored (title, body, trailers). */
  message: string;
}

const SIGNATURE_TAIL = /> (-?\d+) ([+-])(\d\d)(\d\d)$/;

/**
 * `Name <email> 1705312800 +0100` → Signature. Same reading as the pattern
 * `^(.*?) ?<([^>]*)> (-?\d+) ([+-])(\d\d)(\d\d)$`, found with index searches: a log of
 * thousands of commits parses two signatures each, and the lazy pattern's backtracking was
 * most of the parse time.
 */
export function parseSignature(line: string): Signature {
  const tail = SIGNATURE_TAIL.exec(line);
  // The email is everything after the first `<` that has no `>` between it and the tail.
  const gt = tail ? tail.index : -1;
  const lt = gt < 0 ? -1 : line.indexOf('<', line.lastIndexOf('>', gt - 1) + 1);
  if (!tail || lt < 0 || lt > gt) return { name: line, email: '', time: 0, tzMinutes: 0 };
  const sign = tail[2] === '-' ? -1 : 1;
  return {
    name: line.slice(0, line[lt - 1] === ' ' ? lt - 1 : lt),
    email: line.slice(lt + 1, gt),
    time: Number(tail[1]),
    tzMinutes: sign * (Number(tail[3]) * 60 + Number(tail[4])),
  };
}

/** Parses a raw commit object (`git cat-file commit`). */
export function parseCommitObject(id: string, data: Buffer): Commit {
  const text = data.toString('utf8');
  const split = text.indexOf('\n\n');
  const headerText = split >= 0 ? text.slice(0, split) : text;
  const message = split >= 0 ? text.slice(split + 2) : '';
  let tree = '';
  const parentIds: string[] = [];
  let author = parseSignature('');
  let committer = parseSignature('');
  for (const line of headerText.split('\n')) {
    if (line.startsWith(' ')) continue; // continuation of a multi-line header (gpgsig)
    const space = line.indexOf(' ');
    const key = line.slice(0, space);
    const value = line.slice(space + 1);
    if (key === 'tree') tree = value;
    else if (key === 'parent') parentIds.push(value);
    else if (key === 'author') author = parseSignature(value);
    else if (key === 'committer') committer = parseSignature(value);
  }
  return { id, tree, parentIds, author, committer, message };
}

/** ISO 8601 in the signature's own offset with milliseconds, as GitLab prints commit dates. */
export function formatGitTime(sig: Pick<Signature, 'time' | 'tzMinutes'>): string {
  const shifted = new Date((sig.time + sig.tzMinutes * 60) * 1000).toISOString().slice(0, 23);
  const sign = sig.tzMinutes < 0 ? '-' : '+';
  const abs = Math.abs(sig.tzMinutes);
  return `${shifted}${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

/** The first line of the message (GitLab's `full_title`). */
export function fullTitle(message: string): string {
  return message.split(/[\r\n]/, 1)[0] ?? '';
}

/** GitLab's `title`: the first line, shortened past 100 characters at a word boundary. */
export function commitTitle(message: string): string {
  const title = fullTitle(message);
  if (title.length < 100) return title;
  const limit = 81 - 1;
  const cut = title.slice(0, limit + 1);
  const space = cut.lastIndexOf(' ');
  return `${(space > 0 ? cut.slice(0, space) : title.slice(0, limit)).trimEnd()}…`;
}

// Trailers git itself writes; a block with one of them counts even if not all lines are trailers.
const GIT_GENERATED = ['Signed-off-by: ', '(cherry picked from commit '];
const TRAILER_LINE = /^([A-Za-z0-9][A-Za-z0-9-]*)[ \t]*:[ \t]*(.*)$/;

/**
 * Trailers of a message, by git's rules (trailer.c): the last paragraph, when every line is a
 * `Key: value` trailer (or continuation), or when at least a quarter are and one is
 * git-generated. Values of continuation lines are unfolded. Returns [key, value] pairs in order.
 */
export function parseTrailers(message: string): [string, string][] {
  let text = message.replace(/\r\n/g, '\n');
  // A `---` line starts a patch part; trailers come before it.
  const divider = /^---(\s|$)/m.exec(text);
  if (divider) text = text.slice(0, divider.index);
  const lines = text.replace(/\s+$/, '').split('\n');
  let start = lines.length;
  while (start > 0 && (lines[start - 1] as string).trim() !== '') start--;
  if (start === 0) return []; // the message is one paragraph: it is the title, not trailers
  const block = lines.slice(start);
  const pairs: [string, string][] = [];
  let trailerLines = 0;
  let otherLines = 0;
  let generated = false;
  for (const line of block) {
    if (/^[ \t]/.test(line) && pairs.length > 0) {
      const last = pairs[pairs.length - 1] as [string, string];
      last[1] = `${last[1]} ${line.trim()}`.trim();
      continue;
    }
    const match = TRAILER_LINE.exec(line);
    if (match) {
      trailerLines++;
      pairs.push([match[1] as string, (match[2] as string).trim()]);
      if (GIT_GENERATED.some((prefix) => line.startsWith(prefix))) generated = true;
    } else {
      otherLines++;
      if (GIT_GENERATED.some((prefix) => line.startsWith(prefix))) generated = true;
    }
  }
  if (trailerLines === 0) return [];
  if (otherLines === 0 || (generated && trailerLines * 3 >= otherLines)) return pairs;
  return [];
}
