import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gitEnvironment } from '../../src/git/command.js';
import { GitError, RefLockedError, RefNameConflictError } from '../../src/git/errors.js';
import { STALE_REF_LOCK_MS } from '../../src/git/locks.js';
import { createRef, deleteRef, qualifiedRef, writeTagObject } from '../../src/git/ref-write.js';

const exec = promisify(execFile);
let scratch: string;
let gitDir: string;
let first: string;
let second: string;
const git = async (...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8' })).stdout.trim();
const refs = () => git('for-each-ref', '--format=%(objectname) %(refname)');

beforeAll(async () => {
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-refwrite-'));
  gitDir = path.join(scratch, 'repo.git');
  await exec('git', ['init', '--quiet', '--bare', gitDir], { env: gitEnvironment() });
  const env = {
    ...gitEnvironment(),
    GIT_AUTHOR_NAME: 'A',
    GIT_AUTHOR_EMAIL: 'a@example.com',
    GIT_COMMITTER_NAME: 'A',
    GIT_COMMITTER_EMAIL: 'a@example.com',
  };
  const tree = (
    await exec('git', [`--git-dir=${gitDir}`, 'hash-object', '-w', '-t', 'tree', '/dev/null'], { env })
  ).stdout.trim();
  first = (await exec('git', [`--git-dir=${gitDir}`, 'commit-tree', '-m', 'one', tree], { env })).stdout.trim();
  second = (
    await exec('git', [`--git-dir=${gitDir}`, 'commit-tree', '-p', first, '-m', 'two', tree], { env })
  ).stdout.trim();
});
afterAll(async () => {
  await fs.rm(scratch, { recursive: true, force: true });
});

describe('ref updates', () => {
  it('creates a ref only where none exists, and names clashing paths apart', async () => {
    await createRef(gitDir, 'branch', 'topic', first);
    expect(await git('rev-parse', 'refs/heads/topic')).toBe(first);
    const again = await createRef(gitDir, 'branch', 'topic', second).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(GitError);
    expect((again as GitError).code).toBe('conflict');
    expect(again).not.toBeInstanceOf(RefNameConflictError);
    expect(await git('rev-parse', 'refs/heads/topic')).toBe(first);
    // `topic` exists, so `topic/child` cannot; `nested/deep/er` exists, so `nested` cannot.
    await createRef(gitDir, 'branch', 'nested/deep/er', first);
    for (const name of ['topic/child', 'nested']) {
      const clash = await createRef(gitDir, 'branch', name, first).catch((e: unknown) => e);
      expect(clash).toBeInstanceOf(RefNameConflictError);
      expect((clash as GitError).code).toBe('conflict');
    }
  });

  it('deletes a ref only while it still points where the caller saw it', async () => {
    await createRef(gitDir, 'tag', 'moving', first);
    const stale = await deleteRef(gitDir, 'tag', 'moving', second).catch((e: unknown) => e);
    expect((stale as GitError).code).toBe('conflict');
    expect(await git('rev-parse', 'refs/tags/moving')).toBe(first);
    await deleteRef(gitDir, 'tag', 'moving', first);
    const gone = await deleteRef(gitDir, 'tag', 'moving', first).catch((e: unknown) => e);
    expect((gone as GitError).code).toBe('conflict');
    expect(await refs()).not.toContain('refs/tags/moving');
  });

  it('refuses names and ids that could be read as options or leave refs/, before running git', async () => {
    const before = await refs();
    for (const name of ['-d', '--stdin', '../../HEAD', 'a..b', 'x.lock', 'a b', 'HEAD', '']) {
      await expect(createRef(gitDir, 'branch', name, first)).rejects.toMatchObject({ code: 'invalid_argument' });
    }
    await expect(createRef(gitDir, 'branch', 'ok', '--all')).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(createRef(gitDir, 'branch', 'ok', 'main')).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(deleteRef(gitDir, 'branch', '-d', first)).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(deleteRef(gitDir, 'branch', 'topic', '-')).rejects.toMatchObject({ code: 'invalid_argument' });
    expect(await refs()).toBe(before);
    // Names git accepts but GitLab does not create can still be removed.
    expect(qualifiedRef('branch', 'a'.repeat(40), false)).toBe(`refs/heads/${'a'.repeat(40)}`);
    expect(() => qualifiedRef('branch', 'a'.repeat(40), true)).toThrow(GitError);
  });
});

describe('annotated tag objects', () => {
  it('writes what git mktag accepts, with the identity cleaned as git cleans it', async () => {
    const id = await writeTagObject(gitDir, {
      name: 'v1',
      target: first,
      targetType: 'commit',
      tagger: { name: ' Eve <evil>\nInjected ', email: 'eve@example.com>\n', date: new Date(1_700_000_000_000) },
      message: 'Release one',
    });
    expect(await git('cat-file', '-t', id)).toBe('tag');
    expect(await git('cat-file', '-p', id)).toBe(
      `object ${first}\ntype commit\ntag v1\ntagger Eve evilInjected <eve@example.com> 1700000000 +0000\n\nRelease one`,
    );
    // The object exists, but no ref was touched.
    expect(await refs()).not.toContain('refs/tags/v1');
    await expect(
      writeTagObject(gitDir, {
        name: 'bad name',
        target: first,
        targetType: 'commit',
        tagger: { name: 'A', email: 'a@example.com', date: new Date() },
        message: 'm',
      }),
    ).rejects.toMatchObject({ code: 'invalid_argument' });
  });
});

describe('ref locks left by a crashed writer', () => {
  it('removes a lock older than any git we run could hold, and keeps refusing while a lock is fresh', async () => {
    await createRef(gitDir, 'branch', 'locked', first);
    const lock = path.join(gitDir, 'refs', 'heads', 'locked.lock');
    await fs.writeFile(lock, '');

    // A fresh lock may belong to a live writer: the update is a conflict and the lock stays.
    const fresh = await deleteRef(gitDir, 'branch', 'locked', first).catch((e: unknown) => e);
    expect(fresh).toBeInstanceOf(RefLockedError);
    expect((fresh as GitError).code).toBe('conflict');
    expect(await fs.stat(lock)).toBeTruthy();
    expect(await git('rev-parse', 'refs/heads/locked')).toBe(first);

    // One older than twice the git timeout was left by a process killed while holding it.
    const old = new Date(Date.now() - STALE_REF_LOCK_MS - 1000);
    await fs.utimes(lock, old, old);
    await deleteRef(gitDir, 'branch', 'locked', first);
    await expect(fs.stat(lock)).rejects.toThrow();
    expect(await refs()).not.toContain('refs/heads/locked');
  });
});
