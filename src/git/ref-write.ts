import type { ObjectType } from './catfile.js';
import { gitText } from './command.js';
import { InvalidArgumentError } from './errors.js';
import { updateRef } from './update-ref.js';
import { isValidBranchName, isValidRefFormat, isValidTagName } from './validate.js';
import type { GitIdentity } from './write.js';

export type RefKind = 'branch' | 'tag';

const PREFIX: Record<RefKind, string> = { branch: 'refs/heads/', tag: 'refs/tags/' };
const OID = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

/**
 * The full ref for a branch or tag name. `forCreation` applies GitLab's stricter rules for new
 * names; otherwise any name git itself accepts passes, so refs pushed with odd names can still
 * be removed.
 */
export function qualifiedRef(kind: RefKind, name: string, forCreation: boolean): string {
  const valid = forCreation
    ? kind === 'branch'
      ? isValidBranchName(name)
      : isValidTagName(name)
    : !name.startsWith('-') && isValidRefFormat(`${PREFIX[kind]}${name}`);
  if (!valid) throw new InvalidArgumentError(`invalid ${kind} name`);
  return `${PREFIX[kind]}${name}`;
}

function assertOid(oid: string): void {
  if (!OID.test(oid)) throw new InvalidArgumentError('not an object id');
}

/**
 * Points a new branch or tag at `newOid`, only if the ref does not exist yet (a compare-and-swap
 * against the zero id). A concurrent creator makes it fail with a `conflict` GitError; a name
 * that clashes with an existing ref's path fails with RefNameConflictError.
 */
export async function createRef(gitDir: string, kind: RefKind, name: string, newOid: string): Promise<void> {
  const ref = qualifiedRef(kind, name, true);
  assertOid(newOid);
  await updateRef(gitDir, `depot: create ${kind}`, [ref, newOid, '0'.repeat(newOid.length)]);
}

/**
 * Removes a branch or tag only if it still points at `expectedOid`: a ref that moved or went
 * away meanwhile makes it fail with a `conflict` GitError and nothing changes.
 */
export async function deleteRef(gitDir: string, kind: RefKind, name: string, expectedOid: string): Promise<void> {
  const ref = qualifiedRef(kind, name, false);
  assertOid(expectedOid);
  await updateRef(gitDir, `depot: delete ${kind}`, [ref, expectedOid], true);
}

/** Git refuses these in an identity; git's own ident code drops them the same way. */
const identityText = (text: string) => text.replace(/[<>\n\r\0]/g, '').trim();

/**
 * Writes an annotated tag object for `target` (checked by `git mktag`) and returns its id. The
 * message is stored as given; the ref is not touched.
 */
export async function writeTagObject(
  gitDir: string,
  options: { name: string; target: string; targetType: ObjectType; tagger: GitIdentity; message: string },
): Promise<string> {
  qualifiedRef('tag', options.name, true);
  assertOid(options.target);
  const name = identityText(options.tagger.name);
  const email = identityText(options.tagger.email);
  if (name === '') throw new InvalidArgumentError('tagger name is empty');
  const seconds = Math.floor(options.tagger.date.getTime() / 1000);
  const object =
    `object ${options.target}\ntype ${options.targetType}\ntag ${options.name}\n` +
    `tagger ${name} <${email}> ${seconds} +0000\n\n${options.message}`;
  return gitText({ gitDir, subcommand: 'mktag', input: object });
}
