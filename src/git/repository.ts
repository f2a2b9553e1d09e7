import fs from 'node:fs/promises';
import path from 'node:path';
import { createDirs } from '../storage/copy.js';
import { runGit } from './command.js';

/** Creates an empty bare repository whose HEAD points at `defaultBranch`. */
export async function initBareRepository(repoPath: string, defaultBranch: string): Promise<void> {
  // One level at a time: Node's recursive mkdir reports a read-only storage as ENOENT.
  await createDirs(path.dirname(repoPath));
  await runGit({
    subcommand: 'init',
    flags: ['--bare', '--quiet', `--initial-branch=${defaultBranch}`],
    paths: [repoPath],
  });
}

/** Removes a repository directory; missing is fine. */
export async function removeRepository(repoPath: string): Promise<void> {
  await fs.rm(repoPath, { recursive: true, force: true });
}

export async function repositoryExists(repoPath: string): Promise<boolean> {
  try {
    return (await fs.stat(path.join(repoPath, 'HEAD'))).isFile();
  } catch {
    return false;
  }
}
