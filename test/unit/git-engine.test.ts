import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildSampleRepository } from '../../fixtures/sample-repo.js';
import { CATFILE_MAX_AGE_MS, evictRepository, objectInfo, readObject } from '../../src/git/catfile.js';
import { GIT_TIMEOUT_MS, gitEnvironment } from '../../src/git/command.js';
import { formatGitTime, parseCommitObject, parseTrailers } from '../../src/git/commit.js';
import { GitError } from '../../src/git/errors.js';

const exec = promisify(execFile);
let scratch: string;
let gitDir: string;
const git = async (...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8', maxBuffer: 1 << 26 }))
    .stdout;

beforeAll(async () => {
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-engine-'));
  gitDir = path.join(scratch, 'sample.git');
  await buildSampleRepository(gitDir);
});
afterAll(async () => {
  await fs.rm(scratch, { recursive: true, force: true });
});

/** Pids of the cat-file processes serving `dir` (from /proc, so only ours match). */
async function catFilePids(dir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await fs.readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(`--git-dir=${dir}\0`) && cmdline.includes('cat-file')) pids.push(Number(entry));
  }
  return pids;
}

describe('the cat-file pool', () => {
  it('reads every object of the repository as git does, many at once', async () => {
    const listing = (await git('rev-list', '--objects', '--all')).trim().split('\n');
    const oids = listing.map((line) => line.slice(0, 40));
    const results = await Promise.all(oids.map((oid) => readObject(gitDir, oid)));
    for (const [i, oid] of oids.entries()) {
      const object = results[i];
      expect(object?.oid).toBe(oid);
      const type = (await git('cat-file', '-t', oid)).trim();
      expect(object?.type).toBe(type);
      const raw = await exec('git', [`--git-dir=${gitDir}`, 'cat-file', type, oid], {
        env: gitEnvironment(),
        encoding: 'buffer',
        maxBuffer: 1 << 26,
      });
      expect(Buffer.compare(object?.data as Buffer, raw.stdout)).toBe(0);
    }
    // Bounded: never more than 4 processes for one repository, however many reads were queued.
    const pids = await catFilePids(gitDir);
    expect(pids.length).toBeGreaterThan(0);
    expect(pids.length).toBeLessThanOrEqual(4);
  });

  it('answers null for missing objects and unknown revisions', async () => {
    expect(await objectInfo(gitDir, '0'.repeat(40))).toBeNull();
    expect(await objectInfo(gitDir, 'no-such-branch')).toBeNull();
    expect(await objectInfo(gitDir, 'main:no/such/file')).toBeNull();
    await expect(objectInfo(gitDir, 'main\nmain')).rejects.toBeInstanceOf(GitError);
  });

  it('starts a new process when the pooled one died', async () => {
    const head = (await git('rev-parse', 'main')).trim();
    expect((await objectInfo(gitDir, 'main'))?.oid).toBe(head);
    const before = await catFilePids(gitDir);
    expect(before.length).toBeGreaterThan(0);
    for (const pid of before) process.kill(pid, 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect((await objectInfo(gitDir, 'main'))?.oid).toBe(head);
    const after = await catFilePids(gitDir);
    expect(after.length).toBeGreaterThan(0);
    expect(after.some((pid) => before.includes(pid))).toBe(false);
  });

  it('answers a timeout when the pooled process stops answering, then starts a new one', async () => {
    const dir = path.join(scratch, 'hang.git');
    await exec('git', ['clone', '--quiet', '--bare', gitDir, dir], { env: gitEnvironment() });
    const head = (await git('rev-parse', 'main')).trim();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let stopped: number[] = [];
    try {
      expect((await objectInfo(dir, 'main'))?.oid).toBe(head);
      stopped = await catFilePids(dir);
      expect(stopped).toHaveLength(1);
      for (const pid of stopped) process.kill(pid, 'SIGSTOP');
      const outcome = objectInfo(dir, 'main').then(
        () => 'answered',
        (error: unknown) => error,
      );
      await vi.advanceTimersByTimeAsync(GIT_TIMEOUT_MS - 1000);
      expect(await Promise.race([outcome, Promise.resolve('waiting')])).toBe('waiting');
      await vi.advanceTimersByTimeAsync(1001);
      const error = await outcome;
      expect(error).toBeInstanceOf(GitError);
      expect((error as GitError).code).toBe('timeout');
    } finally {
      vi.useRealTimers();
      for (const pid of stopped) {
        try {
          process.kill(pid, 'SIGCONT');
        } catch {
          // Already gone: the watchdog's kill reached it.
        }
      }
    }
    expect((await objectInfo(dir, 'main'))?.oid).toBe(head);
    expect((await catFilePids(dir)).some((pid) => stopped.includes(pid))).toBe(false);
  });

  it('answers immutable revisions from memory once read, and asks git for refs every time', async () => {
    const dir = path.join(scratch, 'cached.git');
    await exec('git', ['clone', '--quiet', '--bare', gitDir, dir], { env: gitEnvironment() });
    const inDir = (...args: string[]) => exec('git', [`--git-dir=${dir}`, ...args], { env: gitEnvironment() });
    const head = (await git('rev-parse', 'main')).trim();
    const readme = `${head}:README.md`;
    const warm = await readObject(dir, readme);
    expect(warm?.type).toBe('blob');
    expect((await readObject(dir, `${head}^{tree}`))?.type).toBe('tree');
    const pids = await catFilePids(dir);
    expect(pids.length).toBeGreaterThan(0);
    for (const pid of pids) process.kill(pid, 'SIGSTOP');
    try {
      // git is stopped: only a kept answer can come back.
      const again = await Promise.race([
        readObject(dir, readme),
        new Promise((resolve) => setTimeout(() => resolve('git was asked'), 2000)),
      ]);
      expect(again).toEqual(warm);
      expect((await objectInfo(dir, `${head}^{tree}`))?.type).toBe('tree');
    } finally {
      for (const pid of pids) process.kill(pid, 'SIGCONT');
    }
    // A branch moves: its name is resolved anew.
    const parent = (await git('rev-parse', 'main~1')).trim();
    expect((await objectInfo(dir, 'main'))?.oid).toBe(head);
    await inDir('update-ref', 'refs/heads/main', parent);
    expect((await objectInfo(dir, 'main'))?.oid).toBe(parent);
  });

  it('keeps a small object in memory of its own, not in a slice of a shared pool slab', async () => {
    const dir = path.join(scratch, 'owned.git');
    await exec('git', ['clone', '--quiet', '--bare', gitDir, dir], { env: gitEnvironment() });
    const head = (await git('rev-parse', 'main')).trim();
    const first = await readObject(dir, head);
    expect(first?.type).toBe('commit');
    expect(first?.size).toBeLessThan(4096); // small enough for Node's 8 KiB allocation pool
    const kept = await readObject(dir, head);
    expect(kept?.data.equals(first?.data as Buffer)).toBe(true);
    // A slice would keep the whole slab (8 KiB and whatever else shares it) alive while cached.
    expect(kept?.data.byteOffset).toBe(0);
    expect(kept?.data.buffer.byteLength).toBe(kept?.size);
  });

  it('keeps no answer for a missing object, nor one from another repository', async () => {
    const dir = path.join(scratch, 'other.git');
    await exec('git', ['init', '--quiet', '--bare', dir], { env: gitEnvironment() });
    const head = (await git('rev-parse', 'main')).trim();
    expect((await readObject(gitDir, head))?.type).toBe('commit');
    expect(await objectInfo(dir, head)).toBeNull();
    expect(await readObject(dir, `${head}:README.md`)).toBeNull();
    // Asked for before it exists, then it arrives (a push): it is found.
    const hashObject = async (write: boolean) =>
      (
        await exec('sh', ['-c', `printf late | git --git-dir=${dir} hash-object ${write ? '-w' : ''} --stdin`], {
          env: gitEnvironment(),
        })
      ).stdout.trim();
    const late = await hashObject(false);
    expect(await readObject(dir, late)).toBeNull();
    expect(await hashObject(true)).toBe(late);
    expect((await readObject(dir, late))?.data.toString()).toBe('late');
    evictRepository(dir);
    expect((await readObject(dir, late))?.data.toString()).toBe('late');
  });

  it('retires a process past its maximum age once it has answered its queue, losing no request', async () => {
    const dir = path.join(scratch, 'aging.git');
    await exec('git', ['clone', '--quiet', '--bare', gitDir, dir], { env: gitEnvironment() });
    const oids = (await git('rev-list', '--objects', '--all'))
      .trim()
      .split('\n')
      .map((line) => line.slice(0, 40));
    const exited = async (pid: number) => {
      for (let i = 0; i < 100; i++) {
        if (!(await catFilePids(dir)).includes(pid)) return true;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      return false;
    };
    const head = (await git('rev-parse', 'main')).trim();
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      expect((await objectInfo(dir, 'main'))?.type).toBe('commit');
      const [first] = await catFilePids(dir);
      expect(first).toBeGreaterThan(0);
      // Reads queued on the old process, then its age runs out while they wait.
      const queued = oids.map((oid) => readObject(dir, oid));
      vi.setSystemTime(Date.now() + CATFILE_MAX_AGE_MS + 1);
      // A branch name is always asked of git (never kept), so these go to a process.
      const later = Array.from({ length: 8 }, () => objectInfo(dir, 'main'));
      const answers = await Promise.all([...queued, ...later]);
      expect(answers.map((a) => a?.oid)).toEqual([...oids, ...later.map(() => head)]);
      // The next read stops the old process (now idle) and is answered by a young one.
      expect((await objectInfo(dir, 'main'))?.type).toBe('commit');
      expect(await exited(first as number)).toBe(true);
      const now = await catFilePids(dir);
      expect(now.length).toBeGreaterThan(0);
      expect(now.length).toBeLessThanOrEqual(4);
    } finally {
      vi.useRealTimers();
      evictRepository(dir);
    }
  });

  it('tells a missing repository apart from a missing object', async () => {
    const error = await objectInfo(path.join(scratch, 'nope.git'), 'main').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GitError);
    expect((error as GitError).code).toBe('repository_missing');
  });
});

describe('commit parsing', () => {
  it('reads every commit of the fixture as git log prints it', async () => {
    const format = ['%H', '%P', '%an', '%ae', '%at', '%ai', '%cn', '%ce', '%ct', '%ci'].join('%x1f');
    const lines = (await git('log', '--all', `--format=${format}`)).trim().split('\n');
    for (const line of lines) {
      const [id, parents, an, ae, at, ai, cn, ce, ct, ci] = line.split('\x1f') as string[];
      const object = await readObject(gitDir, id as string);
      const commit = parseCommitObject(id as string, object?.data as Buffer);
      expect(commit.parentIds.join(' ')).toBe(parents);
      expect([commit.author.name, commit.author.email, String(commit.author.time)]).toEqual([an, ae, at]);
      expect([commit.committer.name, commit.committer.email, String(commit.committer.time)]).toEqual([cn, ce, ct]);
      // `%ai` is "2024-01-15 10:00:00 +0100": the same instant and offset as our ISO form.
      const toIso = (s: string) => s.replace(/^(\S+) (\S+) ([+-]\d\d)(\d\d)$/, '$1T$2.000$3:$4');
      expect(formatGitTime(commit.author)).toBe(toIso(ai as string));
      expect(formatGitTime(commit.committer)).toBe(toIso(ci as string));
      expect(commit.message).toBe((await git('cat-file', 'commit', id as string)).split('\n\n').slice(1).join('\n\n'));
    }
  });

  it('keeps the commit’s own offset, with milliseconds', () => {
    expect(formatGitTime({ time: 1338205362, tzMinutes: -420 })).toBe('2012-05-28T04:42:42.000-07:00');
    expect(formatGitTime({ time: 0, tzMinutes: 0 })).toBe('1970-01-01T00:00:00.000+00:00');
    expect(formatGitTime({ time: 1700000000, tzMinutes: 330 })).toBe('2023-11-15T03:43:20.000+05:30');
  });

  it('finds trailers by git’s rules (checked against git interpret-trailers)', async () => {
    const messages = [
      'Title\n\nBody text.\n\nChangelog: added\nSigned-off-by: A <a@example.com>\n',
      'Title\n\nChangelog: fixed\n',
      'Only a title: with a colon\n',
      'Title\n\nNot a trailer block\nChangelog: added\n',
      'Title\n\nBody\n\nSigned-off-by: A <a@example.com>\nSome free text\nMore free text\n',
      'Title\n\nKey: value\n  continued here\nOther: x\n',
      'Title\n\nChangelog: added\n---\npatch notes: here\n',
    ];
    for (const message of messages) {
      const { stdout } = await exec(
        'sh',
        ['-c', 'printf "%s" "$0" | git interpret-trailers --parse --unfold', message],
        {
          env: gitEnvironment(),
          encoding: 'utf8',
        },
      );
      const expected = stdout
        .split('\n')
        .filter(Boolean)
        .map((line) => {
          const i = line.indexOf(':');
          return [line.slice(0, i), line.slice(i + 1).trim()];
        });
      expect({ message, trailers: parseTrailers(message) }).toEqual({ message, trailers: expected });
    }
  });
});
