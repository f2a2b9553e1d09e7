import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Project } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';

const exec = promisify(execFile);

export interface GitRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the real git client in `cwd`; resolves with its exit code and output instead of throwing. */
export async function runGitClient(args: string[], cwd: string): Promise<GitRun> {
  try {
    const { stdout, stderr } = await exec('git', args, {
      cwd,
      env: gitEnvironment({
        GIT_AUTHOR_NAME: 'T',
        GIT_AUTHOR_EMAIL: 't@example.com',
        GIT_COMMITTER_NAME: 'T',
        GIT_COMMITTER_EMAIL: 't@example.com',
      }),
      encoding: 'utf8',
      maxBuffer: 1 << 26,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

export interface GitCredentials {
  login: string;
  password: string;
}

/** The HTTP remote of a project on a running server, with credentials in the URL when given. */
export function remoteUrl(baseUrl: string, project: Pick<Project, 'full_path'>, credentials?: GitCredentials): string {
  const url = new URL(`/${project.full_path}.git`, baseUrl);
  if (credentials) {
    url.username = encodeURIComponent(credentials.login);
    url.password = encodeURIComponent(credentials.password);
  }
  return url.toString();
}
