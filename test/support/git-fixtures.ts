import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { gitEnvironment } from '../../src/git/command.js';

const exec = promisify(execFile);

/** Native git on a bare repository, output as a Buffer. */
export async function gitIn(gitDir: string, args: string[], env: Record<string, string> = {}): Promise<Buffer> {
  const { stdout } = await exec('git', [`--git-dir=${gitDir}`, ...args], {
    env: gitEnvironment(env),
    encoding: 'buffer',
    maxBuffer: 1 << 28,
  });
  return stdout;
}

export interface FixtureFile {
  content: Buffer | string;
  /** `100644` unless told. */
  mode?: '100644' | '100755' | '120000';
}

/**
 * Commits `files` (the whole tree) onto `branch` of a bare repository with native plumbing and
 * a fixed date, so tests can build the exact repositories they need. Returns the commit id.
 */
export async function commitTree(
  gitDir: string,
  branch: string,
  files: Record<string, FixtureFile>,
  options: { message?: string; parent?: string | null; date?: string } = {},
): Promise<string> {
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-index-'));
  const index = { GIT_INDEX_FILE: path.join(scratch, 'index') };
  try {
    for (const [file, { content, mode }] of Object.entries(files)) {
      const blobFile = path.join(scratch, 'blob');
      await fs.writeFile(blobFile, content);
      const oid = (await gitIn(gitDir, ['hash-object', '-w', blobFile])).toString().trim();
      await gitIn(gitDir, ['update-index', '--add', '--cacheinfo', `${mode ?? '100644'},${oid},${file}`], index);
    }
    const tree = (await gitIn(gitDir, ['write-tree'], index)).toString().trim();
    const date = options.date ?? '1705312800 +0000';
    const who = { name: 'Fixture Bot', email: 'fixture@example.com' };
    const env = {
      GIT_AUTHOR_NAME: who.name,
      GIT_AUTHOR_EMAIL: who.email,
      GIT_AUTHOR_DATE: date,
      GIT_COMMITTER_NAME: who.name,
      GIT_COMMITTER_EMAIL: who.email,
      GIT_COMMITTER_DATE: date,
    };
    const parent = options.parent === undefined ? await tip(gitDir, branch) : options.parent;
    const args = ['commit-tree', tree, '-m', options.message ?? 'Fixture commit', ...(parent ? ['-p', parent] : [])];
    const commit = (await gitIn(gitDir, args, env)).toString().trim();
    await gitIn(gitDir, ['update-ref', `refs/heads/${branch}`, commit]);
    return commit;
  } finally {
    await fs.rm(scratch, { recursive: true, force: true });
  }
}

async function tip(gitDir: string, branch: string): Promise<string | null> {
  try {
    return (await gitIn(gitDir, ['rev-parse', '--verify', '-q', `refs/heads/${branch}`])).toString().trim() || null;
  } catch {
    return null;
  }
}
