import { objectInfo, readObject } from './catfile.js';
import { gitText, runGit } from './command.js';
import { type Commit, parseCommitObject, parseSignature, type Signature } from './commit.js';
import { InvalidArgumentError } from './errors.js';
import { isValidRevision } from './validate.js';

/**
 * Resolves a user-supplied revision (branch, tag, sha, `main~1`) to a commit, or null when it
 * names nothing or is not a valid revision. Never throws for bad input.
 */
export async function resolveCommit(gitDir: string, rev: string): Promise<Commit | null> {
  if (!isValidRevision(rev)) return null;
  const obj = await readObject(gitDir, `${rev}^{commit}`);
  if (obj?.type !== 'commit') return null;
  return parseCommitObject(obj.oid, obj.data);
}

/** Resolves to a commit id only (cheaper: no object body). */
export async function resolveCommitId(gitDir: string, rev: string): Promise<string | null> {
  if (!isValidRevision(rev)) return null;
  const info = await objectInfo(gitDir, `${rev}^{commit}`);
  return info && info.type === 'commit' ? info.oid : null;
}

/** Reads one commit by id (or any revision); null when missing. */
export const readCommit = resolveCommit;

export interface Branch {
  name: string;
  target: string;
}

export interface Tag {
  name: string;
  /** What the ref points at: the tag object for annotated tags, else the commit. */
  target: string;
  /** The commit the tag finally points at (null when it tags a tree or blob). */
  commitId: string | null;
  /** Annotated tags only. */
  message: string | null;
  tagger: Signature | null;
}

const FIELD = '%00';

/** Every branch, by name. */
export async function listBranches(gitDir: string): Promise<Branch[]> {
  const out = await gitText({
    gitDir,
    subcommand: 'for-each-ref',
    flags: [`--format=%(refname:lstrip=2)${FIELD}%(objectname)`, '--sort=refname'],
    args: ['refs/heads/'],
  });
  if (out === '') return [];
  return out.split('\n').map((line) => {
    const [name, target] = line.split('\0') as [string, string];
    return { name, target };
  });
}

/** Every tag, with annotations, by name. */
export async function listTags(gitDir: string): Promise<Tag[]> {
  const { stdout } = await runGit({
    gitDir,
    subcommand: 'for-each-ref',
    flags: [
      `--format=%(refname:lstrip=2)${FIELD}%(objectname)${FIELD}%(objecttype)${FIELD}%(*objectname)${FIELD}%(*objecttype)${FIELD}%(taggername) %(taggeremail) %(taggerdate:raw)${FIELD}%(contents)%01`,
      '--sort=refname',
    ],
    args: ['refs/tags/'],
  });
  const records = stdout
    .toString('utf8')
    .split('\x01\n')
    .filter((r) => r !== '' && r !== '\n');
  return records.map((record) => {
    const [name, target, type, peeled, peeledType, tagger, contents] = record.split('\0') as string[];
    const annotated = type === 'tag';
    const commitId = annotated
      ? peeledType === 'commit'
        ? (peeled as string)
        : null
      : type === 'commit'
        ? (target as string)
        : null;
    return {
      name: name as string,
      target: target as string,
      commitId,
      message: annotated ? (contents ?? '') : null,
      tagger:
        annotated && tagger && tagger.trim() !== ''
          ? parseSignature((tagger as string).replace(/^(.*) <(.*)> /, '$1 <$2> '))
          : null,
    };
  });
}

/** The branch HEAD points at (the default branch of a bare repository). */
export async function headBranch(gitDir: string): Promise<string | null> {
  try {
    return await gitText({ gitDir, subcommand: 'symbolic-ref', flags: ['--short', '-q'], args: ['HEAD'] });
  } catch {
    return null;
  }
}

/** True when the repository has no branches at all. */
export async function isEmptyRepository(gitDir: string): Promise<boolean> {
  const out = await gitText({
    gitDir,
    subcommand: 'for-each-ref',
    flags: ['--count=1', '--format=%(refname)'],
    args: ['refs/heads/'],
  });
  return out === '';
}

/**
 * Branches merged into the commit `tip` (their tip is an ancestor of it), leaving out those that
 * point at `tip` itself, as GitLab's merged_branch_names does. With `names`, only those branches
 * are asked about: git then walks back only as far as the oldest of them needs.
 */
export async function listMergedBranches(gitDir: string, tip: string, names?: readonly string[]): Promise<Branch[]> {
  if (!/^[0-9a-f]{40,64}$/.test(tip)) throw new InvalidArgumentError('merged-into takes a commit id');
  if (names?.length === 0) return [];
  const out = await gitText({
    gitDir,
    subcommand: 'for-each-ref',
    flags: [`--merged=${tip}`, `--format=%(refname:lstrip=2)${FIELD}%(objectname)`, '--sort=refname'],
    // A pattern also matches the refs below it (`refs/heads/a` matches `refs/heads/a/b`).
    args: names ? names.map((name) => `refs/heads/${name}`) : ['refs/heads/'],
  });
  if (out === '') return [];
  const wanted = names ? new Set(names) : null;
  return out
    .split('\n')
    .map((line) => {
      const [name, target] = line.split('\0') as [string, string];
      return { name, target };
    })
    .filter((b) => b.target !== tip && (!wanted || wanted.has(b.name)));
}
