import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { addMember, makeSampleProject, makeToken, makeUser, ROLES } from '../support/factories.js';

const exec = promisify(execFile);
let app: TestApp;
let project: Project;
let gitDir: string;
let token: string;

const git = async (...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8' })).stdout;
const url = (file: string) => `/projects/${project.id}/repository/files/${encodeURIComponent(file)}`;

beforeAll(async () => {
  app = await startTestApp();
  const owner = await makeUser(app);
  ({ project, gitDir } = await makeSampleProject(app, owner, { path: 'files' }));
  const dev = await makeUser(app);
  await addMember(app, { type: 'project', id: project.id }, dev, ROLES.maintainer);
  token = await makeToken(app, dev, ['api']);
});
afterAll(async () => {
  await app?.close();
});

describe('POST|PUT|DELETE /projects/:id/repository/files/:file_path', () => {
  it('creates, updates and deletes a file, one commit each, as git shows', async () => {
    const start = (await git('rev-parse', 'main')).trim();
    const create = await app.request(url('notes/new file.txt'), {
      method: 'POST',
      token,
      body: { branch: 'main', content: 'first\n', commit_message: 'Add notes', execute_filemode: true },
    });
    expect(create).toMatchObject({ status: 201, body: { file_path: 'notes/new file.txt', branch: 'main' } });
    expect(await git('cat-file', 'blob', 'main:notes/new file.txt')).toBe('first\n');
    expect((await git('ls-tree', 'main', 'notes/new file.txt')).startsWith('100755 ')).toBe(true);

    const again = await app.request(url('notes/new file.txt'), {
      method: 'POST',
      token,
      body: { branch: 'main', content: 'x', commit_message: 'again' },
    });
    expect(again).toMatchObject({ status: 400, body: { message: 'A file with this name already exists' } });

    const update = await app.request(url('notes/new file.txt'), {
      method: 'PUT',
      token,
      body: {
        branch: 'main',
        content: Buffer.from('second\n').toString('base64'),
        encoding: 'base64',
        commit_message: 'Edit',
      },
    });
    expect(update).toMatchObject({ status: 200, body: { file_path: 'notes/new file.txt', branch: 'main' } });
    expect(await git('cat-file', 'blob', 'main:notes/new file.txt')).toBe('second\n');

    const stale = await app.request(url('notes/new file.txt'), {
      method: 'PUT',
      token,
      body: { branch: 'main', content: 'x', commit_message: 'stale', last_commit_id: start },
    });
    expect(stale.body).toEqual({
      message: 'You are attempting to update a file that has changed since you started editing it.',
    });

    const del = await app.request(url('notes/new file.txt'), {
      method: 'DELETE',
      token,
      body: { branch: 'main', commit_message: 'Remove' },
    });
    expect(del.status).toBe(204);
    expect((await git('ls-tree', 'main', 'notes/new file.txt')).trim()).toBe('');
    expect((await git('rev-list', '--count', `${start}..main`)).trim()).toBe('3');
    const missing = await app.request(url('notes/new file.txt'), {
      method: 'DELETE',
      token,
      body: { branch: 'main', commit_message: 'Remove' },
    });
    expect(missing.body).toEqual({ message: "A file with this name doesn't exist" });
  });

  it('refuses bad paths and missing parameters in GitLab’s shape', async () => {
    const head = (await git('rev-parse', 'main')).trim();
    for (const file of ['../x.txt', 'a/../../x', '/etc/passwd', 'a\nb']) {
      const res = await app.request(url(file), {
        method: 'POST',
        token,
        body: { branch: 'main', content: 'x', commit_message: 'm' },
      });
      expect({ file, status: res.status, body: res.body }).toEqual({
        file,
        status: 400,
        body: { error: 'file_path should be a valid file path' },
      });
    }
    const noBranch = await app.request(url('x.txt'), {
      method: 'POST',
      token,
      body: { content: 'x', commit_message: 'm' },
    });
    expect(noBranch).toMatchObject({ status: 400, body: { error: 'branch is missing' } });
    expect((await git('rev-parse', 'main')).trim()).toBe(head);
  });
});
