import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  makeAdmin,
  makeProjectMember,
  makeSampleProject,
  makeToken,
  makeUser,
  putSettings,
} from '../support/factories.js';

// The web raw file endpoint (GitLab's Projects::RawController) and raw_blob_request_limit, its
// requests per minute per project and file path (issue 16 item 4).

const exec = promisify(execFile);
let app: TestApp;
let owner: User;
let adminToken: string;
let counter = 0;

const LIMITED = 'You cannot access the raw file. Please wait a minute.';

const setSettings = (body: Record<string, unknown>) => putSettings(app, adminToken, body);

const raw = (project: Project, refAndPath: string, headers: Record<string, string> = {}) =>
  fetch(`${app.baseUrl}/${project.full_path}/-/raw/${refAndPath}`, { headers, redirect: 'manual' });

const gitShow = async (gitDir: string, spec: string) =>
  (await exec('git', [`--git-dir=${gitDir}`, 'show', spec], { env: gitEnvironment(), encoding: 'buffer' })).stdout;

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
  adminToken = await makeToken(app, await makeAdmin(app));
});
afterEach(async () => {
  await setSettings({ raw_blob_request_limit: 300 });
});
afterAll(async () => {
  await app?.close();
});

describe('GET /<project>/-/raw/<ref>/<path>', () => {
  it('serves a file at a branch, a branch with a slash and a commit, byte for byte as git stores it', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: `raw${++counter}` });
    const commit = (
      await exec('git', [`--git-dir=${gitDir}`, 'rev-parse', 'stable'], { env: gitEnvironment() })
    ).stdout.trim();
    for (const [ref, spec] of [
      ['main', 'main:README.md'],
      ['feature/merge-me', 'feature/merge-me:README.md'],
      [commit, `${commit}:README.md`],
    ] as const) {
      const res = await raw(project, `${ref}/README.md`);
      expect({ ref, status: res.status }).toEqual({ ref, status: 200 });
      expect(res.headers.get('content-disposition')).toMatch(/^inline; filename="README.md"/);
      expect(Buffer.from(await res.arrayBuffer()).equals(await gitShow(gitDir, spec))).toBe(true);
    }
    expect((await raw(project, 'main/no-such-file')).status).toBe(404);
    expect((await raw(project, 'no-such-ref/README.md')).status).toBe(404);
  });

  it('asks anonymous callers of a private project to sign in, and takes a token of a member', async () => {
    const { project } = await makeSampleProject(app, owner, { path: `raw${++counter}`, visibility: 'private' });
    const anonymous = await raw(project, 'main/README.md');
    expect(anonymous.status).toBe(302);
    expect(anonymous.headers.get('location')).toMatch(/\/users\/sign_in$/);
    const { token } = await makeProjectMember(app, project, 'reporter', ['read_repository']);
    expect((await raw(project, 'main/README.md', { 'PRIVATE-TOKEN': token })).status).toBe(200);
    const stranger = await makeToken(app, await makeUser(app));
    expect((await raw(project, 'main/README.md', { 'PRIVATE-TOKEN': stranger })).status).toBe(404);
  });
});

describe('raw_blob_request_limit', () => {
  it('answers 429 with GitLab text past the limit for one path, whatever the ref, until the minute ends', async () => {
    const { project } = await makeSampleProject(app, owner, { path: `raw${++counter}` });
    app.clock.set('2026-01-01T00:00:05Z');
    await setSettings({ raw_blob_request_limit: 2 });
    expect((await raw(project, 'main/README.md')).status).toBe(200);
    expect((await raw(project, 'stable/README.md')).status).toBe(200);
    const limited = await raw(project, 'main/README.md');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await limited.text()).toBe(LIMITED);
    expect(Number(limited.headers.get('retry-after'))).toBe(55);
    // Another path of the project has its own count.
    expect((await raw(project, 'main/CHANGELOG.md')).status).not.toBe(429);

    app.clock.advance(60_000);
    expect((await raw(project, 'main/README.md')).status).toBe(200);
  });

  it('counts nothing when set to 0', async () => {
    const { project } = await makeSampleProject(app, owner, { path: `raw${++counter}` });
    await setSettings({ raw_blob_request_limit: 0 });
    for (let i = 0; i < 5; i++) expect((await raw(project, 'main/README.md')).status).toBe(200);
    await setSettings({ raw_blob_request_limit: 1 });
    expect((await raw(project, 'main/README.md')).status).toBe(200);
    expect((await raw(project, 'main/README.md')).status).toBe(429);
  });
});
