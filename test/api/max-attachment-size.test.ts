import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken, makeUserWithToken } from '../support/factories.js';

// max_attachment_size (MiB) bounds the files of a multipart request, read at each request.

const MIB = 1024 * 1024;
let app: TestApp;
let adminToken: string;
let userToken: string;
let counter = 0;

beforeAll(async () => {
  app = await startTestApp();
  adminToken = await makeToken(app, await makeAdmin(app));
  userToken = (await makeUserWithToken(app)).token;
});
afterAll(async () => {
  await app?.close();
});

async function setLimit(mib: number) {
  const res = await app.request('/application/settings', {
    method: 'PUT',
    token: adminToken,
    body: { max_attachment_size: mib },
  });
  expect(res.status, res.text).toBe(200);
}

/** Creates a project with an avatar of `bytes` bytes, sent as multipart as GitLab clients do. */
async function createWithAvatar(bytes: number) {
  counter += 1;
  const form = new FormData();
  form.append('name', `with-avatar-${counter}`);
  form.append('avatar', new Blob([new Uint8Array(bytes)], { type: 'image/png' }), 'avatar.png');
  const res = await fetch(new URL('/api/v4/projects', app.baseUrl), {
    method: 'POST',
    headers: { 'PRIVATE-TOKEN': userToken },
    body: form,
  });
  return { status: res.status, body: await res.json() };
}

describe('max_attachment_size', () => {
  it('refuses an upload over the limit with 413, and a raised limit admits it at once', async () => {
    await setLimit(1);
    expect(await createWithAvatar(MIB + 1)).toEqual({
      status: 413,
      body: { message: '413 Request Entity Too Large' },
    });
    expect((await createWithAvatar(MIB - 1024)).status).toBe(201);
    await setLimit(2);
    expect((await createWithAvatar(MIB + 1)).status).toBe(201);
  });

  it("defaults to GitLab's 10 MiB", async () => {
    await app.deps.db.deleteFrom('application_settings').where('key', '=', 'max_attachment_size').execute();
    expect((await createWithAvatar(10 * MIB + 1)).status).toBe(413);
    expect((await createWithAvatar(9 * MIB)).status).toBe(201);
  });
});
