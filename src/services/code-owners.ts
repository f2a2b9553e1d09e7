import type { MergeRequest, Project } from '../db/schema.js';
import { readBlob } from '../git/blob.js';
import { changedPaths } from '../git/merge.js';
import { mergeBase } from '../git/merge-base.js';
import { readBranchTip } from '../git/repo-info.js';
import { readTreeEntry } from '../git/tree.js';
import { codeOwnerApprovalRequired } from '../policies/merge-requests.js';
import type { Deps } from './deps.js';

/** Where GitLab looks for the file, in its order. */
export const CODEOWNERS_PATHS = ['CODEOWNERS', 'docs/CODEOWNERS', '.gitlab/CODEOWNERS'] as const;
/** A CODEOWNERS file larger than this is not read (GitLab skips big files the same way). */
const MAX_CODEOWNERS_BYTES = 1024 * 1024;
const DEFAULT_SECTION = 'codeowners';

export interface CodeOwnerEntry {
  section: string;
  /** The pattern as written. */
  pattern: string;
  /** `@name` owners (users or groups, resolved later), without the `@`. */
  owners: string[];
  /** Owners given by email. */
  emails: string[];
  optional: boolean;
  approvalsRequired: number;
  matcher: RegExp;
}

export interface CodeOwnersFile {
  /** Entries in file order; within a section the last matching one wins. */
  entries: CodeOwnerEntry[];
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

// Turns a CODEOWNERS pattern into a regular expression over `/`-prefixed repository paths, as
// GitLab matches them (Gitlab::CodeOwners::File): a pattern not starting with `/` matches at any
// depth ("/**/" is put in front), one ending in `/` matches everything below ("**/*" is put
// behind), and the result is read as File.fnmatch with FNM_PATHNAME, FNM_DOTMATCH and
// FNM_EXTGLOB: `*` and `?` stay within a directory, "**/" spans any number of them, `{a,b}` is
// either.
export function patternToRegExp(raw: string): RegExp {
  let pattern = raw.replace(/^\\#/, '#').replace(/\\\s+/g, ' ');
  if (pattern === '*') pattern = '/**/*';
  if (!pattern.startsWith('/')) pattern = `/**/${pattern}`;
  if (pattern.endsWith('/')) pattern = `${pattern}**/*`;
  let body = '';
  let braces = 0;
  for (let i = 0; i < pattern.length; i += 1) {
    const c = pattern[i] as string;
    if (c === '*' && pattern[i + 1] === '*' && pattern[i + 2] === '/' && (i === 0 || pattern[i - 1] === '/')) {
      body += '(?:[^/]*/)*';
      i += 2;
    } else if (c === '*') {
      body += '[^/]*';
      while (pattern[i + 1] === '*') i += 1;
    } else if (c === '?') body += '[^/]';
    else if (c === '{') {
      braces += 1;
      body += '(?:';
    } else if (c === '}' && braces > 0) {
      braces -= 1;
      body += ')';
    } else if (c === ',' && braces > 0) body += '|';
    else if (c === '[') {
      const close = pattern.indexOf(']', i + 2);
      if (close < 0) body += '\\[';
      else {
        const inner = pattern
          .slice(i + 1, close)
          .replace(/^!/, '^')
          .replace(/\\/g, '\\\\');
        body += `[${inner}]`;
        i = close;
      }
    } else if (c === '\\' && i + 1 < pattern.length) {
      i += 1;
      body += escapeRegExp(pattern[i] as string);
    } else body += escapeRegExp(c);
  }
  if (braces > 0) return /(?!)/;
  return new RegExp(`^${body}$`);
}

const SECTION = /^(\^)?\[([^\]]+)\](?:\[(\d+)\])?\s*(.*)$/;

/**
 * Parses GitLab's CODEOWNERS syntax: comments, `[Section]` headers (`^[Section]` optional,
 * `[Section][2]` needing two approvals) with optional default owners, and `pattern owners...`
 * lines. An entry without owners takes its section's default owners.
 */
export function parseCodeOwners(text: string): CodeOwnersFile {
  const entries: CodeOwnerEntry[] = [];
  let section = DEFAULT_SECTION;
  let optional = false;
  let approvals = 1;
  let defaults: string[] = [];
  for (const rawLine of text.split(/\r?\n/)) {
    const line = rawLine.trim();
    if (line === '' || line.startsWith('#')) continue;
    const header = SECTION.exec(line);
    if (header && !line.startsWith('\\')) {
      optional = header[1] === '^';
      section = (header[2] as string).trim();
      approvals = header[3] !== undefined ? Math.max(1, Number(header[3])) : 1;
      defaults = (header[4] ?? '').split(/\s+/).filter((o) => o !== '' && !o.startsWith('#'));
      continue;
    }
    // The pattern ends at the first unescaped whitespace.
    const match = /^((?:\\.|\S)+)\s*(.*)$/.exec(line);
    if (!match) continue;
    const pattern = match[1] as string;
    let owners = (match[2] ?? '').split(/\s+/).filter((o) => o !== '');
    const comment = owners.findIndex((o) => o.startsWith('#'));
    if (comment >= 0) owners = owners.slice(0, comment);
    if (owners.length === 0) owners = defaults;
    entries.push({
      section,
      pattern,
      owners: owners.filter((o) => o.startsWith('@')).map((o) => o.slice(1)),
      emails: owners.filter((o) => !o.startsWith('@') && o.includes('@')),
      optional,
      approvalsRequired: optional ? 0 : approvals,
      matcher: patternToRegExp(pattern),
    });
  }
  return { entries };
}

/**
 * The entries that own each path: per section, the last entry whose pattern matches, as GitLab
 * decides. Returns the matching entries once each, in file order.
 */
export function entriesForPaths(file: CodeOwnersFile, paths: readonly string[]): CodeOwnerEntry[] {
  const used = new Set<CodeOwnerEntry>();
  for (const path of paths) {
    const lastBySection = new Map<string, CodeOwnerEntry>();
    for (const entry of file.entries) if (entry.matcher.test(`/${path}`)) lastBySection.set(entry.section, entry);
    for (const entry of lastBySection.values()) used.add(entry);
  }
  return file.entries.filter((e) => used.has(e));
}

/** The CODEOWNERS file at a commit, from the first place GitLab looks that has one. */
export async function readCodeOwners(gitDir: string, commitId: string): Promise<CodeOwnersFile | null> {
  for (const path of CODEOWNERS_PATHS) {
    const entry = await readTreeEntry(gitDir, commitId, path);
    if (entry?.type !== 'blob') continue;
    const data = await readBlob(gitDir, entry.id);
    if (!data || data.length > MAX_CODEOWNERS_BYTES) return null;
    return parseCodeOwners(data.toString('utf8'));
  }
  return null;
}

/**
 * Rebuilds the merge request's `code_owner` rules (GitLab's SyncCodeOwnerApprovalRules): one rule
 * per CODEOWNERS entry (of the target branch) that owns a file the merge request changes, its
 * users and groups resolved from the owners, when the target branch requires code-owner approval.
 * `force` syncs whatever the branch requires (tests and callers that decided already).
 */
export async function syncCodeOwnerRules(
  deps: Deps,
  project: Project,
  mr: MergeRequest,
  gitDir: string,
  force = false,
): Promise<void> {
  const required = force || (await codeOwnerApprovalRequired(deps, project, mr.target_branch));
  const target = await readBranchTip(gitDir, mr.target_branch);
  let entries: CodeOwnerEntry[] = [];
  if (required && target && mr.sha) {
    const file = await readCodeOwners(gitDir, target);
    if (file) {
      const base = (await mergeBase(gitDir, [target, mr.sha])) ?? target;
      entries = entriesForPaths(file, await changedPaths(gitDir, base, mr.sha));
    }
  }
  const names = [...new Set(entries.flatMap((e) => e.owners))];
  const users = names.length
    ? await deps.db.selectFrom('users').select(['id', 'username']).where('username', 'in', names).execute()
    : [];
  const groups = names.length
    ? await deps.db
        .selectFrom('namespaces')
        .select(['id', 'full_path'])
        .where('kind', '=', 'group')
        .where('full_path', 'in', names)
        .execute()
    : [];
  const emails = [...new Set(entries.flatMap((e) => e.emails.map((m) => m.toLowerCase())))];
  const byEmail = emails.length
    ? await deps.db
        .selectFrom('users')
        .select(['id', 'email'])
        .where((eb) => eb.fn('lower', ['email']), 'in', emails)
        .execute()
    : [];
  const now = deps.clock.now();
  await deps.db.transaction().execute(async (trx) => {
    await trx
      .deleteFrom('approval_merge_request_rules')
      .where('merge_request_id', '=', mr.id)
      .where('rule_type', '=', 'code_owner')
      .execute();
    for (const entry of entries) {
      const userIds = [
        ...users.filter((u) => entry.owners.includes(u.username)).map((u) => u.id),
        ...byEmail.filter((u) => entry.emails.some((m) => m.toLowerCase() === u.email.toLowerCase())).map((u) => u.id),
      ];
      await trx
        .insertInto('approval_merge_request_rules')
        .values({
          merge_request_id: mr.id,
          name: entry.pattern,
          rule_type: 'code_owner',
          approvals_required: entry.approvalsRequired,
          user_ids: [...new Set(userIds)],
          group_ids: groups.filter((g) => entry.owners.includes(g.full_path)).map((g) => g.id),
          section: entry.section,
          created_at: now,
          updated_at: now,
        })
        .execute();
    }
  });
}
