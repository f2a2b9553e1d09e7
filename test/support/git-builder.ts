import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { gitEnvironment } from '../../src/git/command.js';

const exec = promisify(execFile);

export interface Author {
  name: string;
  email: string;
}

/**
 * Builds a small repository in a scratch work tree with native git (fixed dates, one hour per
 * commit) and installs it as a project's bare repository with `install`.
 */
export class RepoBuilder {
  private step = 0;
  private constructor(readonly work: string) {}

  static async create(): Promise<RepoBuilder> {
    const work = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-repo-builder-'));
    const builder = new RepoBuilder(work);
    await builder.git({ name: 'Setup', email: 'setup@example.com' }, 'init', '--quiet', '--initial-branch=main');
    return builder;
  }

  async git(who: Author, ...args: string[]): Promise<string> {
    const date = `${1_700_000_000 + this.step * 3600} +0000`;
    const env = gitEnvironment({
      GIT_AUTHOR_NAME: who.name,
      GIT_AUTHOR_EMAIL: who.email,
      GIT_AUTHOR_DATE: date,
      GIT_COMMITTER_NAME: who.name,
      GIT_COMMITTER_EMAIL: who.email,
      GIT_COMMITTER_DATE: date,
    });
    const { stdout } = await exec('git', args, { cwd: this.work, env, maxBuffer: 64 * 1024 * 1024 });
    return stdout.trim();
  }

  /** One commit (empty unless files are given); returns its id. */
  async commit(who: Author, message: string, files: Record<string, string> = {}): Promise<string> {
    this.step += 1;
    for (const [file, content] of Object.entries(files)) {
      const full = path.join(this.work, file);
      await fs.mkdir(path.dirname(full), { recursive: true });
      await fs.writeFile(full, content);
    }
    await this.git(who, 'add', '--all');
    await this.git(who, 'commit', '--quiet', '--allow-empty', '-m', message);
    return this.git(who, 'rev-parse', 'HEAD');
  }

  /** Replaces `gitDir` with a bare copy of everything built so far. */
  async install(gitDir: string): Promise<void> {
    await fs.rm(gitDir, { recursive: true, force: true });
    await exec('git', ['clone', '--quiet', '--bare', '--no-local', this.work, gitDir], { env: gitEnvironment() });
    await fs.rm(this.work, { recursive: true, force: true });
  }
}
