import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linkLfsObject } from '../../src/db/queries/lfs.js';
import type { Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeProject, makeSampleProject, makeToken, makeUser } from '../support/factories.js';
import { commitTree, gitIn } from '../support/git-fixtures.js';

let app: TestApp;
let owner: User;
let project: Project;
let gitDir: string;

const git = (...args: string[]) => gitIn(gitDir, args);
const text = async (...args: string[]) => (await git(...args)).toString('utf8').trim();

const METADATA_KEYS = [
  'file_name',
  'file_path',
  'size',
  'encoding',
  'content_sha256',
  'ref',
  'blob_id',
  'commit_id',
  'last_commit_id',
  'execute_filemode',
];

/** Every file of `ref` as `git ls-tree -r` lists it (symlinks included, submodules not). */
async function lsFiles(ref: string) {
  return (await git('ls-tree', '-r', '-z', ref))
    .toString('utf8')
    .split('\0')
    .filter(Boolean)
    .map((record) => {
      const [meta, file] = record.split('\t') as [string, string];
      const [mode, type, id] = meta.split(' ') as [string, string, string];
      return { mode, type, id, path: file };
    })
    .filter((e) => e.type === 'blob');
}

/** What GitLab's blob_data says about `path` at `ref`, computed with native git. */
async function expectedMetadata(ref: string, file: { mode: string; id: string; path: string }) {
  const bytes = await git('cat-file', 'blob', file.id);
  return {
    bytes,
    metadata: {
      file_name: path.posix.basename(file.path),
      file_path: file.path,
      size: bytes.length,
      encoding: 'base64',
      content_sha256: createHash('sha256').update(bytes).digest('hex'),
      ref,
      blob_id: file.id,
      commit_id: await text('rev-parse', `${ref}^{commit}`),
      last_commit_id: await text('log', '-1', '--format=%H', ref, '--', `:(literal)${file.path}`),
      execute_filemode: file.mode === '100755',
    },
  };
}

/** X-Gitlab-* headers, with their UTF-8 bytes read back (fetch hands header bytes over as latin1). */
function gitlabHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, key) => {
    if (key.startsWith('x-gitlab-')) out[key] = Buffer.from(value, 'latin1').toString('utf8');
  });
  return out;
}

const headerName = (key: string) => `x-gitlab-${key.replaceAll('_', '-')}`;
const asHeaders = (metadata: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(metadata).map(([k, v]) => [headerName(k), v === null ? '' : String(v)]));

const fileUrl = (id: number, file: string, suffix = '') =>
  `/projects/${id}/repository/files/${encodeURIComponent(file)}${suffix}`;

const raw = (url: string, init: RequestInit = {}) => fetch(new URL(`/api/v4${url}`, app.baseUrl), init);

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
  ({ project, gitDir } = await makeSampleProject(app, owner, { path: 'files' }));
});
afterAll(async () => {
  await app?.close();
});

describe('GET /projects/:id/repository/files/:file_path', () => {
  it('returns every file of every ref with the bytes, ids and last commit git reports', async () => {
    const initial = await text('rev-list', '--max-parents=0', 'main');
    for (const ref of ['main', 'stable', 'v1.0.0', 'feature/merge-me', initial]) {
      const files = await lsFiles(ref);
      expect(files.length).toBeGreaterThan(3);
      for (const file of files) {
        const { bytes, metadata } = await expectedMetadata(ref, file);
        const res = await app.request(fileUrl(project.id, file.path), { query: { ref } });
        expect({ ref, path: file.path, status: res.status }).toEqual({ ref, path: file.path, status: 200 });
        expect(res.headers.get('content-type')).toBe('application/json');
        expect(Object.keys(res.body)).toEqual([...METADATA_KEYS, 'content']);
        const { content, ...rest } = res.body;
        expect(rest).toEqual(metadata);
        expect(Buffer.from(content, 'base64').equals(bytes)).toBe(true);
        expect(content).toBe(bytes.toString('base64'));
        expect(gitlabHeaders(res.headers)).toEqual(asHeaders(metadata));
      }
    }
  });

  it('knows executables, symlinks and files deleted later', async () => {
    const script = await app.request(fileUrl(project.id, 'bin/run.sh'), { query: { ref: 'main' } });
    expect(script.body.execute_filemode).toBe(true);
    const link = await app.request(fileUrl(project.id, 'docs/latest'), { query: { ref: 'main' } });
    expect(Buffer.from(link.body.content, 'base64').toString()).toBe('guide/intro.md');
    expect(link.body.execute_filemode).toBe(false);
    // Removed on main, still in v1.0.0.
    const old = await app.request(fileUrl(project.id, 'src/app/deprecated.js'), { query: { ref: 'v1.0.0' } });
    expect(old.status).toBe(200);
    expect(old.body.last_commit_id).toBe(await text('rev-parse', 'v1.0.0~3'));
    const gone = await app.request(fileUrl(project.id, 'src/app/deprecated.js'), { query: { ref: 'main' } });
    expect(gone.body).toEqual({ message: '404 File Not Found' });
  });

  it('answers HEAD with the X-Gitlab-* headers and no body', async () => {
    for (const file of await lsFiles('main')) {
      const { metadata } = await expectedMetadata('main', file);
      const res = await raw(`${fileUrl(project.id, file.path)}?ref=main`, { method: 'HEAD' });
      expect({ path: file.path, status: res.status }).toEqual({ path: file.path, status: 200 });
      expect(await res.text()).toBe('');
      expect(gitlabHeaders(res.headers)).toEqual(asHeaders(metadata));
    }
    const unicode = await raw(`${fileUrl(project.id, 'データ/説明.txt')}?ref=main`, { method: 'HEAD' });
    expect(gitlabHeaders(unicode.headers)['x-gitlab-file-name']).toBe('説明.txt');
    const missing = await raw(`${fileUrl(project.id, 'nope.txt')}?ref=main`, { method: 'HEAD' });
    expect(missing.status).toBe(404);
    const noRef = await raw(fileUrl(project.id, 'README.md'), { method: 'HEAD' });
    expect(noRef.status).toBe(400);
  });

  it('answers GitLab’s errors for refs, paths and parameters', async () => {
    const get = (file: string, query?: Record<string, string>) =>
      app.request(`/projects/${project.id}/repository/files/${file}`, query ? { query } : {});
    expect((await get('README.md')).body).toEqual({ error: 'ref is missing' });
    expect((await get('README.md', { ref: '' })).body).toEqual({ error: 'ref is empty' });
    expect((await get('README.md', { ref: '  ' })).body).toEqual({ error: 'ref is empty' });
    expect((await get('README.md', { ref: 'no-such-branch' })).body).toEqual({ message: '404 Commit Not Found' });
    expect((await get('README.md', { ref: '0'.repeat(40) })).body).toEqual({ message: '404 Commit Not Found' });
    expect((await get('nope.md', { ref: 'main' })).body).toEqual({ message: '404 File Not Found' });
    expect((await get('docs', { ref: 'main' })).body).toEqual({ message: '404 File Not Found' });
    expect((await get('docs%2F', { ref: 'main' })).body).toEqual({ message: '404 File Not Found' });
    expect((await get('docs%2F%2Flatest', { ref: 'main' })).body).toEqual({ message: '404 File Not Found' });
    const invalid = { error: 'file_path should be a valid file path' };
    for (const bad of [
      '%2e%2e%2f',
      '%2Fetc%2Fpasswd.rb',
      'docs%2F..%2FREADME.md',
      'docs%2F..',
      'a%0Ab',
      '%252E%252E%252Fetc',
    ]) {
      expect({ bad, body: (await get(bad, { ref: 'main' })).body }).toEqual({ bad, body: invalid });
    }
    // Encoded twice: still a literal name after one decoding, so simply not found.
    expect((await get('docs%252Fguide%252Fintro.md', { ref: 'main' })).body).toEqual({ message: '404 File Not Found' });
    // Encoded three times: GitLab refuses a path that keeps decoding.
    expect((await get('docs%25252Fintro.md', { ref: 'main' })).body).toEqual(invalid);
    expect((await get('README.md%00', { ref: 'main' })).body).toEqual({ message: '400 Bad request' });
  });
});

describe('GET /projects/:id/repository/files/:file_path/raw', () => {
  it('streams binary, large and unicode-named files byte for byte with GitLab’s headers', async () => {
    const cases: [string, string, string][] = [
      ['assets/logo.png', 'image/png', `inline; filename="logo.png"; filename*=UTF-8''logo.png`],
      ['data/large.bin', 'application/octet-stream', `attachment; filename="large.bin"; filename*=UTF-8''large.bin`],
      [
        'docs/ünïcödé.md',
        'text/plain; charset=utf-8',
        `inline; filename="unicode.md"; filename*=UTF-8''%C3%BCn%C3%AFc%C3%B6d%C3%A9.md`,
      ],
      [
        'データ/説明.txt',
        'text/plain; charset=utf-8',
        `inline; filename="%3F%3F.txt"; filename*=UTF-8''%E8%AA%AC%E6%98%8E.txt`,
      ],
      [
        'docs/with space.txt',
        'text/plain; charset=utf-8',
        `inline; filename="with space.txt"; filename*=UTF-8''with%20space.txt`,
      ],
      ['bin/run.sh', 'text/plain; charset=utf-8', `inline; filename="run.sh"; filename*=UTF-8''run.sh`],
    ];
    const files = await lsFiles('main');
    for (const [file, type, disposition] of cases) {
      const entry = files.find((f) => f.path === file);
      if (!entry) throw new Error(`fixture lacks ${file}`);
      const { bytes, metadata } = await expectedMetadata('main', entry);
      const res = await raw(`${fileUrl(project.id, file, '/raw')}?ref=main`);
      expect({ file, status: res.status }).toEqual({ file, status: 200 });
      const body = Buffer.from(await res.arrayBuffer());
      expect({ file, same: body.equals(bytes) }).toEqual({ file, same: true });
      expect(res.headers.get('content-length')).toBe(String(bytes.length));
      expect(res.headers.get('content-type')).toBe(type);
      expect(res.headers.get('content-disposition')).toBe(disposition);
      expect(res.headers.get('cache-control')).toBe('max-age=0, private, must-revalidate, no-store, no-cache');
      expect(res.headers.get('expires')).toBe('Fri, 01 Jan 1990 00:00:00 GMT');
      expect(gitlabHeaders(res.headers)).toEqual(asHeaders(metadata));
    }
    const large = files.find((f) => f.path === 'data/large.bin');
    expect(Number(await text('cat-file', '-s', large?.id as string))).toBeGreaterThan(1024 * 1024);
  });

  it('reads the default branch without a ref, any ref with one, and answers HEAD without a body', async () => {
    const readmeMain = await git('cat-file', 'blob', 'main:src/app/util/helpers.js');
    const readmeOld = await git('cat-file', 'blob', 'v1.0.0:src/app/util/helpers.js');
    expect(readmeMain.equals(readmeOld)).toBe(false);
    const noRef = await raw(fileUrl(project.id, 'src/app/util/helpers.js', '/raw'));
    expect(Buffer.from(await noRef.arrayBuffer()).equals(readmeMain)).toBe(true);
    expect(noRef.headers.get('x-gitlab-ref')).toBe('');
    expect(noRef.headers.get('x-gitlab-commit-id')).toBe(await text('rev-parse', 'main'));
    const tagged = await raw(`${fileUrl(project.id, 'src/app/util/helpers.js', '/raw')}?ref=v1.0.0`);
    expect(Buffer.from(await tagged.arrayBuffer()).equals(readmeOld)).toBe(true);
    expect(tagged.headers.get('x-gitlab-ref')).toBe('v1.0.0');

    const head = await raw(`${fileUrl(project.id, 'data/large.bin', '/raw')}?ref=main`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
    expect(head.headers.get('x-gitlab-blob-id')).toBe(await text('rev-parse', 'main:data/large.bin'));
  });

  it('answers GitLab’s errors', async () => {
    const get = (file: string, query = '') =>
      app.request(`/projects/${project.id}/repository/files/${file}/raw${query}`);
    expect((await get('README.md', '?ref=')).body).toEqual({ error: 'ref is empty' });
    expect((await get('README.md', '?ref=nope')).body).toEqual({ message: '404 Commit Not Found' });
    expect((await get('nope.md')).body).toEqual({ message: '404 File Not Found' });
    const invalid = { error: 'file_path should be a valid file path' };
    expect((await get('%2e%2e%2f')).body).toEqual(invalid);
    expect((await get('%2Fetc%2Fpasswd')).body).toEqual(invalid);
    // allow_initial_path_separator: a still-encoded leading slash is a (missing) file name.
    expect((await get('%252Fetc%252Fpasswd')).body).toEqual({ message: '404 File Not Found' });
    expect((await get('README.md', '?lfs=maybe')).body).toEqual({ error: 'lfs is invalid' });
  });
});

describe('raw files and Git LFS', () => {
  const content = Buffer.from('the real bytes behind an LFS pointer\n'.repeat(500));
  const oid = createHash('sha256').update(content).digest('hex');
  const pointer = (id: string, size: number) =>
    `version https://git-lfs.github.com/spec/v1\noid sha256:${id}\nsize ${size}\n`;
  let lfsProject: Project;
  let lfsDir: string;
  const unknownOid = 'ab'.repeat(32);

  beforeAll(async () => {
    lfsProject = await makeProject(app, owner, { path: 'lfs-files', visibility: 'public' });
    lfsDir = app.deps.storages.repositoryPath(lfsProject.repository_storage, lfsProject.id);
    await commitTree(lfsDir, 'main', {
      'asset.iso': { content: pointer(oid, content.length) },
      'missing.iso': { content: pointer(unknownOid, 10) },
      'page.xhtml': { content: '<html xmlns="http://www.w3.org/1999/xhtml"><body>x</body></html>\n' },
      'plain.txt': { content: 'not a pointer\n' },
      ':wq': { content: 'pathspec magic in a name\n' },
      '100%.txt': { content: 'percent\n' },
      'dir:x/inner.txt': { content: 'colon in a directory\n' },
      'empty.txt': { content: '' },
    });
    const stored = app.deps.storages.lfsObjectPath(lfsProject.repository_storage, oid);
    await fs.mkdir(path.dirname(stored), { recursive: true });
    await fs.writeFile(stored, content);
    await linkLfsObject(app.deps.db, lfsProject.id, oid, content.length);
  });

  it('serves the stored object with lfs=true and the pointer without it', async () => {
    const object = await raw(fileUrl(lfsProject.id, 'asset.iso', '/raw?lfs=true'));
    expect(object.status).toBe(200);
    expect(Buffer.from(await object.arrayBuffer()).equals(content)).toBe(true);
    expect(object.headers.get('content-type')).toBe('application/octet-stream');
    expect(object.headers.get('content-transfer-encoding')).toBe('binary');
    expect(object.headers.get('content-disposition')).toBe(
      `attachment; filename="${oid.slice(4)}"; filename*=UTF-8''${oid.slice(4)}`,
    );
    const plain = await raw(fileUrl(lfsProject.id, 'asset.iso', '/raw'));
    expect(await plain.text()).toBe(pointer(oid, content.length));
    const notPointer = await raw(fileUrl(lfsProject.id, 'plain.txt', '/raw?lfs=true'));
    expect(await notPointer.text()).toBe('not a pointer\n');
  });

  it('answers a bare 404 for an object the project does not hold', async () => {
    const res = await app.request(fileUrl(lfsProject.id, 'missing.iso', '/raw'), { query: { lfs: true } });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: '404 Not Found' });
  });

  it('reads names with colons, percent signs and empty files', async () => {
    const cases: [string, string][] = [
      [':wq', 'pathspec magic in a name\n'],
      ['100%.txt', 'percent\n'],
      ['dir:x/inner.txt', 'colon in a directory\n'],
      ['empty.txt', ''],
    ];
    const head = (await gitIn(lfsDir, ['rev-parse', 'main'])).toString().trim();
    for (const [file, content] of cases) {
      const res = await app.request(fileUrl(lfsProject.id, file), { query: { ref: 'main' } });
      expect({ file, status: res.status }).toEqual({ file, status: 200 });
      expect(res.body).toMatchObject({
        file_path: file,
        file_name: path.posix.basename(file),
        size: Buffer.byteLength(content),
        content: Buffer.from(content).toString('base64'),
        last_commit_id: head,
      });
      const rawRes = await raw(fileUrl(lfsProject.id, file, '/raw'));
      expect(rawRes.status).toBe(200);
      expect(await rawRes.text()).toBe(content);
      expect(rawRes.headers.get('content-length')).toBe(String(Buffer.byteLength(content)));
    }
  });

  it('drops everything after the first dot of an .xhtml name and never renders it inline', async () => {
    const res = await raw(fileUrl(lfsProject.id, 'page.xhtml', '/raw'));
    expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(res.headers.get('content-disposition')).toBe(`inline; filename="page"; filename*=UTF-8''page`);
  });
});

describe('large files', () => {
  it('limits JSON downloads of files and blobs over 10 MiB per project, as GitLab’s large_blob_download does', async () => {
    const big = await makeProject(app, owner, { path: 'big-files', visibility: 'public' });
    const bigDir = app.deps.storages.repositoryPath(big.repository_storage, big.id);
    // Larger than the batch reader takes whole (16 MiB): the JSON answers stream it in.
    const bytes = Buffer.alloc(17 * 1024 * 1024, 7);
    bytes.write('not all sevens', 12345);
    await commitTree(bigDir, 'main', { 'huge.bin': { content: bytes }, 'small.txt': { content: 'small\n' } });
    const blobId = (await gitIn(bigDir, ['rev-parse', 'main:huge.bin'])).toString().trim();
    await app.deps.db
      .insertInto('application_settings')
      .values({ key: 'rate_limits', value: JSON.stringify({ large_blob_download: 2 }) })
      .execute();
    const tooMany = (raw: string) => ({
      message: {
        error:
          'The requested blob is over the threshold size of 10485760.\n' +
          `Access this blob using '${raw}' to avoid this error.\n`,
      },
    });
    try {
      const file = await app.request(fileUrl(big.id, 'huge.bin'), { query: { ref: 'main' } });
      expect(file.status).toBe(200);
      expect(file.body.size).toBe(bytes.length);
      expect(Buffer.from(file.body.content, 'base64').equals(bytes)).toBe(true);
      const blob = await app.request(`/projects/${big.id}/repository/blobs/${blobId}`);
      expect(blob.status).toBe(200);
      expect(Buffer.from(blob.body.content, 'base64').equals(bytes)).toBe(true);
      // One counter per project for both endpoints.
      const file2 = await app.request(fileUrl(big.id, 'huge.bin'), { query: { ref: 'main' } });
      expect(file2.status).toBe(429);
      expect(file2.body).toEqual(tooMany('/projects/:id/repository/files/:file_path/raw'));
      const blob2 = await app.request(`/projects/${big.id}/repository/blobs/${blobId}`);
      expect(blob2.status).toBe(429);
      expect(blob2.body).toEqual(tooMany('/projects/:id/repository/blobs/:sha/raw'));
      // Small files and the raw endpoints are not counted.
      expect((await app.request(fileUrl(big.id, 'small.txt'), { query: { ref: 'main' } })).status).toBe(200);
      const rawBig = await raw(fileUrl(big.id, 'huge.bin', '/raw'));
      expect(Buffer.from(await rawBig.arrayBuffer()).equals(bytes)).toBe(true);
      const rawBlob = await raw(`/projects/${big.id}/repository/blobs/${blobId}/raw`);
      expect(Buffer.from(await rawBlob.arrayBuffer()).equals(bytes)).toBe(true);
    } finally {
      await app.deps.db.deleteFrom('application_settings').where('key', '=', 'rate_limits').execute();
    }
  });

  it('takes read_repository tokens for reads', async () => {
    const secret = await makeSampleProject(app, owner, { path: 'files-private', visibility: 'private' });
    const token = await makeToken(app, owner, ['read_repository']);
    const res = await app.request(fileUrl(secret.project.id, 'README.md'), { token, query: { ref: 'main' } });
    expect(res.status).toBe(200);
    const rawRes = await app.request(fileUrl(secret.project.id, 'README.md', '/raw'), { token });
    expect(rawRes.status).toBe(200);
    // Not other read endpoints.
    expect((await app.request(`/projects/${secret.project.id}/repository/tree`, { token })).status).toBe(403);
  });
});
