import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linkLfsObject } from '../../src/db/queries/lfs.js';
import type { Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeProject, makeUser, makeUserWithToken } from '../support/factories.js';
import { commitTree, gitIn } from '../support/git-fixtures.js';

/**
 * Conditional and range requests on raw blobs, raw files and LFS objects: the content's id is a
 * strong ETag, If-None-Match answers 304, one Range 206 (416 past the end), HEAD the headers.
 * GitLab's own headers stay as they are.
 */

let app: TestApp;
let owner: User;
let project: Project;
let gitDir: string;
const text = Buffer.from('line of text\n'.repeat(100));
/** Over INLINE_BLOB_BYTES: streamed by git, or written by git into the connection when whole. */
const big = Buffer.alloc(3 * 1024 * 1024);
for (let i = 0; i < big.length; i += 1) big[i] = (i * 7919) % 251;
const lfsContent = Buffer.from('the bytes of a stored LFS object\n'.repeat(300));
const lfsOid = createHash('sha256').update(lfsContent).digest('hex');
const ids: Record<string, string> = {};

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
  project = await makeProject(app, owner, { path: 'raw-ranges', visibility: 'public' });
  gitDir = app.deps.storages.repositoryPath(project.repository_storage, project.id);
  await commitTree(gitDir, 'main', {
    'notes.txt': { content: text },
    'data.bin': { content: big },
    'empty.txt': { content: '' },
    'asset.iso': {
      content: `version https://git-lfs.github.com/spec/v1\noid sha256:${lfsOid}\nsize ${lfsContent.length}\n`,
    },
  });
  for (const name of ['notes.txt', 'data.bin', 'empty.txt'])
    ids[name] = (await gitIn(gitDir, ['rev-parse', `main:${name}`])).toString().trim();
  const stored = app.deps.storages.lfsObjectPath(project.repository_storage, lfsOid);
  await fs.mkdir(path.dirname(stored), { recursive: true });
  await fs.writeFile(stored, lfsContent);
  await linkLfsObject(app.deps.db, project.id, lfsOid, lfsContent.length);
});
afterAll(async () => {
  await app?.close();
});

const blobUrl = (name: string, p = project) => `/api/v4/projects/${p.id}/repository/blobs/${ids[name]}/raw`;
const fileUrl = (name: string, query = '', p = project) =>
  `/api/v4/projects/${p.id}/repository/files/${encodeURIComponent(name)}/raw${query}`;

async function get(url: string, headers: Record<string, string> = {}, method = 'GET') {
  const res = await fetch(new URL(url, app.baseUrl), { headers, method });
  return { res, bytes: Buffer.from(await res.arrayBuffer()) };
}

/** Every conditional and range behaviour on one URL whose body is `content` and ETag `etag`. */
async function checkUrl(url: string, content: Buffer, etag: string) {
  const full = await get(url);
  expect(full.res.status).toBe(200);
  expect(full.bytes.equals(content)).toBe(true);
  expect(full.res.headers.get('etag')).toBe(etag);
  expect(full.res.headers.get('accept-ranges')).toBe('bytes');
  expect(full.res.headers.get('content-length')).toBe(String(content.length));

  for (const tag of [etag, `W/${etag}`, `"nope", ${etag}`, '*']) {
    const { res, bytes } = await get(url, { 'If-None-Match': tag });
    expect({ url, tag, status: res.status }).toEqual({ url, tag, status: 304 });
    expect(res.headers.get('etag')).toBe(etag);
    expect(bytes.length).toBe(0);
  }
  expect((await get(url, { 'If-None-Match': '"nope"' })).res.status).toBe(200);

  const head = await get(url, {}, 'HEAD');
  expect(head.res.status).toBe(200);
  expect(head.bytes.length).toBe(0);
  expect(head.res.headers.get('content-length')).toBe(String(content.length));
  expect(head.res.headers.get('content-type')).toBe(full.res.headers.get('content-type'));
  expect(head.res.headers.get('content-disposition')).toBe(full.res.headers.get('content-disposition'));

  const middle = Math.floor(content.length / 2);
  const ranges: [string, number, number][] = [
    ['bytes=0-9', 0, 9],
    [`bytes=${middle}-${middle + 99}`, middle, middle + 99],
    [`bytes=${middle}-`, middle, content.length - 1],
    ['bytes=-7', content.length - 7, content.length - 1],
    [`bytes=5-${content.length * 2}`, 5, content.length - 1],
  ];
  for (const [range, start, end] of ranges) {
    const { res, bytes } = await get(url, { Range: range });
    expect({ url, range, status: res.status }).toEqual({ url, range, status: 206 });
    expect(res.headers.get('content-range')).toBe(`bytes ${start}-${end}/${content.length}`);
    expect(res.headers.get('content-length')).toBe(String(end - start + 1));
    expect(res.headers.get('etag')).toBe(etag);
    expect(bytes.equals(content.subarray(start, end + 1))).toBe(true);
  }
  const past = await get(url, { Range: `bytes=${content.length}-` });
  expect(past.res.status).toBe(416);
  expect(past.res.headers.get('content-range')).toBe(`bytes */${content.length}`);
  const stale = await get(url, { Range: 'bytes=0-9', 'If-Range': '"nope"' });
  expect(stale.res.status).toBe(200);
  expect(stale.bytes.equals(content)).toBe(true);
  expect((await get(url, { Range: 'bytes=0-9', 'If-Range': etag })).res.status).toBe(206);
  // Several ranges, or a malformed one, are answered whole.
  expect((await get(url, { Range: 'bytes=0-1,4-5' })).res.status).toBe(200);
  expect((await get(url, { Range: 'lines=1-2' })).res.status).toBe(200);
  return full.res;
}

describe('raw blobs', () => {
  it('a small blob: ETag, 304, HEAD, ranges, with GitLab’s raw headers', async () => {
    const res = await checkUrl(blobUrl('notes.txt'), text, `"${ids['notes.txt']}"`);
    expect(res.headers.get('cache-control')).toBe('max-age=0, private, must-revalidate, no-store, no-cache');
    expect(res.headers.get('expires')).toBe('Fri, 01 Jan 1990 00:00:00 GMT');
    expect(res.headers.get('content-disposition')).toBe('inline');
    expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
  });

  it('a large blob: ranges are streamed around the direct path, whole downloads still take it', async () => {
    const res = await checkUrl(blobUrl('data.bin'), big, `"${ids['data.bin']}"`);
    expect(res.headers.get('content-disposition')).toBe('attachment');
  });

  it('an empty blob has no range to give', async () => {
    const { res } = await get(blobUrl('empty.txt'), { Range: 'bytes=0-' });
    expect(res.status).toBe(416);
    expect(res.headers.get('content-range')).toBe('bytes */0');
    expect((await get(blobUrl('empty.txt'), { 'If-None-Match': `"${ids['empty.txt']}"` })).res.status).toBe(304);
  });
});

describe('raw files', () => {
  it('a file: the blob id is its ETag; X-Gitlab-* headers stay on every answer', async () => {
    const res = await checkUrl(fileUrl('notes.txt', '?ref=main'), text, `"${ids['notes.txt']}"`);
    expect(res.headers.get('x-gitlab-blob-id')).toBe(ids['notes.txt']);
    expect(res.headers.get('content-disposition')).toBe(`inline; filename="notes.txt"; filename*=UTF-8''notes.txt`);
    const partial = await get(fileUrl('notes.txt', '?ref=main'), { Range: 'bytes=0-3' });
    expect(partial.res.headers.get('x-gitlab-file-path')).toBe('notes.txt');
    expect(partial.res.headers.get('x-gitlab-size')).toBe(String(text.length));
  });

  it('a large file', async () => {
    await checkUrl(fileUrl('data.bin'), big, `"${ids['data.bin']}"`);
  });

  it('an LFS object (lfs=true): its oid is its ETag', async () => {
    const res = await checkUrl(fileUrl('asset.iso', '?lfs=true'), lfsContent, `"lfs-${lfsOid}"`);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
  });
});

describe('access comes first', () => {
  it('answers a private blob’s ETag or range with 404 to a caller without access', async () => {
    const secret = await makeProject(app, owner, { path: 'secret-raw', visibility: 'private' });
    const secretDir = app.deps.storages.repositoryPath(secret.repository_storage, secret.id);
    await commitTree(secretDir, 'main', { 'notes.txt': { content: text } });
    const stranger = await makeUserWithToken(app);
    for (const url of [blobUrl('notes.txt', secret), fileUrl('notes.txt', '?ref=main', secret)]) {
      const asks: Record<string, string>[] = [{ 'If-None-Match': `"${ids['notes.txt']}"` }, { Range: 'bytes=0-3' }, {}];
      for (const headers of asks) {
        const anonymous = await get(url, headers);
        expect(anonymous.res.status).toBe(404);
        expect(anonymous.res.headers.get('etag')).toBeNull();
        const other = await get(url, { ...headers, 'PRIVATE-TOKEN': stranger.token });
        expect(other.res.status).toBe(404);
      }
    }
  });
});
