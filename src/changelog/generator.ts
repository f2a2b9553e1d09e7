/**
 * Inserts a release section into an existing changelog file (lib/gitlab/changelog/generator.rb):
 * sections are ordered by version, newest first, and everything else stays byte for byte.
 */
import { type Release, releaseMarkdown, releaseVersion } from './release.js';
import { compareVersions } from './tags.js';

// A `## <semver>` line starts a section; the version need not end the line.
const NUM = '(?:0|[1-9]\\d*)';
const IDENT = '(?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*)';
const SEMVER = `${NUM}\\.${NUM}\\.${NUM}(?:-${IDENT}(?:\\.${IDENT})*)?(?:\\+[0-9a-zA-Z-]+(?:\\.[0-9a-zA-Z-]+)*)?`;
const SECTION_HEADER = new RegExp(`^##[ \\t\\r\\n\\f\\v]+(${SEMVER})`);

/** Lines with their endings, as Ruby's `each_line` gives them. */
function lines(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/** The file with the release's section inserted in version order (or appended). */
export function insertRelease(existing: string, release: Release): string {
  const markdown = releaseMarkdown(release);
  const version = releaseVersion(release.version);
  const fileLines = lines(existing);
  // Version → line index; a version found twice keeps its last line.
  const headers = new Map<string, number>();
  fileLines.forEach((line, index) => {
    const match = SECTION_HEADER.exec(line);
    if (match) headers.set(match[1] as string, index);
  });
  const sorted = [version, ...[...headers.keys()].filter((v) => v !== version)].sort((a, b) => compareVersions(b, a));
  const next = sorted[sorted.indexOf(version) + 1];
  const at = next === undefined ? undefined : headers.get(next);
  if (at !== undefined) {
    return [...fileLines.slice(0, at), markdown, ...fileLines.slice(at)].join('');
  }
  const separator = headers.size > 0 ? '\n' : '';
  return `${existing}${separator}${markdown.trimEnd()}\n`;
}
