import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { gitEnvironment } from '../src/git/command.js';
import { writeLeftovers } from '../src/git/locks.js';
import { type ServerProcess, startServerProcess, tempStorageDir } from './support/server-process.js';

/**
 * Issue 4, item 4: a server killed in the middle of a write leaves a valid repository whose
 * branch points at the old commit or the new one, never at something missing. The real server
 * process (src/main.ts) runs on a temporary STORAGE_DIR and is killed with SIGKILL, together
 * with every git process it started.
 */
const exec = promisify(execFile);
const TOKEN = 'glpat-crash-test-token-0123456789';
/** Just under the 20 MiB body limit once base64-encoded: git needs a while to deflate it. */
const CONTENT_BYTES = 14 * 1024 * 1024;
const dirs: string[] = [];
let server: ServerProcess | undefined;

afterAll(async () => {
  await server?.crash();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

const git = async (gitDir: string, ...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8' })).stdout.trim();

/** The id git gives a blob, computed here so the test can watch git write it. */
const blobId = (content: Buffer) => createHash('sha1').update(`blob ${content.length}\0`).update(content).digest('hex');

/**
 * The id of `commit`'s tree with `file` added, computed in a scratch repository (`mktree
 * --missing`) so that the server's repository only gets the tree when the server writes it.
 */
async function treeWith(gitDir: string, scratch: string, commit: string, file: string, blob: string): Promise<string> {
  const entries = (await git(gitDir, 'ls-tree', `${commit}^{tree}`)).split('\n');
  const child = execFile('git', [`--git-dir=${scratch}`, 'mktree', '--missing'], { env: gitEnvironment() });
  const out = new Promise<string>((resolve, reject) => {
    let text = '';
    child.stdout?.on('data', (d) => {
      text += d;
    });
    child.on('close', (code) => (code === 0 ? resolve(text.trim()) : reject(new Error(`mktree exited ${code}`))));
  });
  child.stdin?.end(`${[...entries, `100644 blob ${blob}\t${file}`].join('\n')}\n`);
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return true;
    await sleep(2);
  }
  return false;
}

describe('a crash in the middle of a commit', () => {
  it('leaves a repository git fsck finds clean, with the branch at the old or the new commit', {
    timeout: 300_000,
  }, async () => {
    const storage = tempStorageDir('depot-crash-');
    dirs.push(storage);
    const env = { STORAGE_DIR: storage, ADMIN_TOKEN: TOKEN, ADMIN_PASSWORD: 'crash-test-password' };
    server = await startServerProcess(env);
    const headers = { 'PRIVATE-TOKEN': TOKEN, 'Content-Type': 'application/json' };
    const project = (await (await fetch(`${server.base}/api/v4/projects/demo%2Fsample`, { headers })).json()) as {
      id: number;
    };
    const hash = createHash('sha256').update(String(project.id)).digest('hex');
    const gitDir = path.join(
      storage,
      'repositories',
      'default',
      '@hashed',
      hash.slice(0, 2),
      hash.slice(2, 4),
      `${hash}.git`,
    );
    expect(await git(gitDir, 'rev-parse', '--is-bare-repository')).toBe('true');
    const scratch = path.join(storage, 'scratch.git');
    await exec('git', ['init', '--quiet', '--bare', scratch], { env: gitEnvironment() });

    // Each round kills the server at a different point of the same large commit.
    const triggers = [
      'while git writes the blob',
      'after the blob is written',
      'after the tree is written',
      'as soon as the branch moves',
      'after a random delay',
    ] as const;
    const outcomes: { trigger: string; killedBeforeAnswer: boolean; moved: boolean }[] = [];
    for (const [round, trigger] of triggers.entries()) {
      const file = `big-${round}.bin`;
      const old = await git(gitDir, 'rev-parse', 'refs/heads/main');
      const content = randomBytes(CONTENT_BYTES);
      const oid = blobId(content);
      const objectDir = path.join(gitDir, 'objects', oid.slice(0, 2));
      const request = fetch(`${server.base}/api/v4/projects/${project.id}/repository/commits`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          branch: 'main',
          commit_message: `Large file (${trigger})`,
          actions: [{ action: 'create', file_path: file, content: content.toString('base64'), encoding: 'base64' }],
        }),
      }).then(
        (res) => res.status,
        () => 'connection lost' as const,
      );
      let answered: number | 'connection lost' | undefined;
      void request.then((status) => {
        answered = status;
      });
      if (trigger === 'while git writes the blob') {
        const writing = () =>
          fs.existsSync(objectDir) && fs.readdirSync(objectDir).some((f) => f.startsWith('tmp_obj_'));
        expect(await waitFor(writing, 60_000)).toBe(true);
      } else if (trigger === 'after the blob is written') {
        expect(await waitFor(() => fs.existsSync(path.join(objectDir, oid.slice(2))), 60_000)).toBe(true);
      } else if (trigger === 'after the tree is written') {
        const tree = await treeWith(gitDir, scratch, old, file, oid);
        const treeFile = path.join(gitDir, 'objects', tree.slice(0, 2), tree.slice(2));
        expect(await waitFor(() => fs.existsSync(treeFile), 60_000)).toBe(true);
      } else if (trigger === 'as soon as the branch moves') {
        const loose = path.join(gitDir, 'refs', 'heads', 'main');
        const moved = () => {
          try {
            return fs.readFileSync(loose, 'utf8').trim() !== old;
          } catch {
            return false;
          }
        };
        expect(await waitFor(moved, 60_000)).toBe(true);
      } else {
        await sleep(200 + Math.floor(Math.random() * 1500));
      }
      const killedBeforeAnswer = answered === undefined;
      await server.crash();
      const status = await request;
      if (!killedBeforeAnswer) expect(status).toBe(201);

      // git itself finds nothing wrong, and main is the old commit or the complete new one.
      const fsck = await exec('git', [`--git-dir=${gitDir}`, 'fsck', '--full', '--strict', '--no-dangling'], {
        env: gitEnvironment(),
        encoding: 'utf8',
      });
      expect(`${fsck.stdout}${fsck.stderr}`).toBe('');
      const tip = await git(gitDir, 'rev-parse', 'refs/heads/main');
      const moved = tip !== old;
      if (moved) {
        expect(await git(gitDir, 'rev-parse', `${tip}^`)).toBe(old);
        expect(await git(gitDir, 'rev-parse', `${tip}:${file}`)).toBe(oid);
      }
      if (killedBeforeAnswer && status === 'connection lost' && trigger === 'while git writes the blob') {
        expect(moved).toBe(false);
      }
      outcomes.push({ trigger, killedBeforeAnswer, moved });
      server = await startServerProcess(env);
    }
    // The blob round cannot have answered before its kill: at least that one was mid-write. The
    // branch round killed the server between moving the ref and answering.
    expect(outcomes[0]).toMatchObject({ trigger: 'while git writes the blob', killedBeforeAnswer: true, moved: false });
    expect(outcomes[3]).toMatchObject({ trigger: 'as soon as the branch moves', moved: true });

    // After all that the repository still takes writes: the ref locks and quarantine a killed git
    // may leave (HEAD.lock when killed just after the branch moved) are cleared by the next writer.
    const after = await fetch(`${server.base}/api/v4/projects/${project.id}/repository/commits`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        branch: 'main',
        commit_message: 'After the crashes',
        actions: [{ action: 'create', file_path: 'after.txt', content: 'still here\n' }],
      }),
    });
    expect({ status: after.status, body: await after.text() }).toMatchObject({ status: 201 });
    expect(await git(gitDir, 'show', 'refs/heads/main:after.txt')).toBe('still here');
    expect(await writeLeftovers(gitDir)).toEqual([]);
    await server.crash();
    server = undefined;
  });
});
