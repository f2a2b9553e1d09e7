/**
 * The changelog commit against a concurrent writer: another commit lands on the branch (and
 * changes the changelog) between our read of the file and our commit. The real commit
 * machinery refuses the stale write; the whole cycle must run again on the new content.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { commitFiles } from '../../src/git/write.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { addMember, makeSampleProject, makeToken, makeUser, ROLES } from '../support/factories.js';

/** Before the next `racingWrites` calls of createCommit, a concurrent writer edits CHANGELOG.md first. */
const race = vi.hoisted(() => ({ racingWrites: 0, calls: 0 }));

vi.mock('../../src/services/repository-commits.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/services/repository-commits.js')>();
  return {
    ...real,
    createCommit: async (...args: Parameters<typeof real.createCommit>) => {
      race.calls += 1;
      if (race.racingWrites > 0) {
        race.racingWrites -= 1;
        const [, , , gitDir, request] = args;
        const { stdout } = await promisify(execFile)(
          'git',
          [`--git-dir=${gitDir}`, 'rev-parse', `refs/heads/${request.branch}`],
          { env: gitEnvironment(), encoding: 'utf8' },
        );
        const parent = stdout.trim();
        const current = await promisify(execFile)('git', [`--git-dir=${gitDir}`, 'show', `${parent}:CHANGELOG.md`], {
          env: gitEnvironment(),
          encoding: 'utf8',
        }).then(
          (r) => r.stdout,
          () => '',
        );
        await commitFiles(gitDir, {
          branch: request.branch,
          parent,
          files: [{ path: 'CHANGELOG.md', content: Buffer.from(`${current}Concurrent line ${race.calls}\n`) }],
          message: 'Concurrent edit',
          author: { name: 'Other', email: 'other@example.com', date: new Date('2024-01-01T00:00:00Z') },
        });
      }
      return real.createCommit(...args);
    },
  };
});

const exec = promisify(execFile);
let app: TestApp;
let owner: User;
let token: string;

const git = async (gitDir: string, ...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8' })).stdout;

async function sample(path: string): Promise<{ project: Project; gitDir: string }> {
  const made = await makeSampleProject(app, owner, { path });
  const maintainer = await makeUser(app);
  await addMember(app, { type: 'project', id: made.project.id }, maintainer, ROLES.maintainer);
  token = await makeToken(app, maintainer);
  return made;
}

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
});
afterAll(async () => {
  await app?.close();
});

describe('POST /projects/:id/repository/changelog against a concurrent writer', () => {
  it('re-reads the file and commits on top of the concurrent change', async () => {
    const { project, gitDir } = await sample('retry');
    await app.request(`/projects/${project.id}/repository/changelog`, {
      method: 'POST',
      token,
      body: { version: '1.0.1', from: 'v1.0.0', to: 'v1.0.0', date: '2024-02-01' },
    });
    race.calls = 0;
    race.racingWrites = 1;
    const res = await app.request(`/projects/${project.id}/repository/changelog`, {
      method: 'POST',
      token,
      body: { version: '1.0.2', from: 'v1.0.0', to: 'v1.0.0', date: '2024-02-01' },
    });
    expect(res.status).toBe(200);
    expect(race.calls).toBe(2);
    expect(await git(gitDir, 'show', 'main:CHANGELOG.md')).toBe(
      '## 1.0.2 (2024-02-01)\n\nNo changes.\n\n## 1.0.1 (2024-02-01)\n\nNo changes.\nConcurrent line 1\n',
    );
    expect((await git(gitDir, 'log', '-2', '--format=%s', 'main')).trim()).toBe(
      'Add changelog for version 1.0.2\nConcurrent edit',
    );
  });

  it('gives up after three refused attempts with a changelog error, losing no concurrent commit', async () => {
    const { project, gitDir } = await sample('give-up');
    race.calls = 0;
    race.racingWrites = 3;
    const res = await app.request(`/projects/${project.id}/repository/changelog`, {
      method: 'POST',
      token,
      body: { version: '1.0.1', from: 'v1.0.0', to: 'v1.0.0', date: '2024-02-01' },
    });
    expect(race.calls).toBe(3);
    expect(res.status).toBe(422);
    expect(res.body.message).toMatch(/^Failed to generate the changelog: /);
    expect((await git(gitDir, 'log', '-3', '--format=%s', 'main')).trim()).toBe(
      'Concurrent edit\nConcurrent edit\nConcurrent edit',
    );
    expect(await git(gitDir, 'show', 'main:CHANGELOG.md')).toBe(
      'Concurrent line 1\nConcurrent line 2\nConcurrent line 3\n',
    );
  });
});
