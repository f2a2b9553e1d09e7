import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { linkLfsObject } from '../../src/db/queries/lfs.js';
import type { Project } from '../../src/db/schema.js';
import { INLINE_BLOB_BYTES } from '../../src/git/blob.js';
import { gitEnvironment } from '../../src/git/command.js';
import { ARCHIVE_CACHE_CLEANUP_SCHEDULE } from '../../src/jobs/archive-cache.js';
import { JOB_KINDS } from '../../src/jobs/kinds.js';
import { Worker } from '../../src/jobs/worker.js';
import { type ArchiveVariant, archiveKey } from '../../src/storage/archive-cache.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { addMember, makeProject, makeSampleProject, makeUserWithToken, ROLES } from '../support/factories.js';
import { type GatedGit, gatedGit } from '../support/gated-git.js';
import { commitTree, gitIn } from '../support/git-fixtures.js';

/**
 * The archive cache (STORAGE_DIR/cache/archive): one generation for concurrent requests in one
 * process or several, byte-identical answers, authorization before the cache, conditional and
 * range requests, the size bound, the age clean-up and project deletion.
 */

const exec = promisify(execFile);
const root = path.resolve(import.meta.dirname, '..', '..');
const tsx = path.join(root, 'node_modules', '.bin', 'tsx');

let scratch: string;
let git: GatedGit;
let app: TestApp;
let owner: { token: string; user: Awaited<ReturnType<typeof makeUserWithToken>>['user'] };
let project: Project;
let gitDir: string;
let mainSha: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-archive-cache-'));
  // Every git this process and its children start goes through the gate (see gated-git.ts).
  git = gatedGit(scratch);
  process.env.PATH = `${git.bin}:${process.env.PATH}`;
  app = await startTestApp();
  owner = await makeUserWithToken(app);
  ({ project, gitDir } = await makeSampleProject(app, owner.user, { path: 'sample' }));
  mainSha = (await gitIn(gitDir, ['rev-parse', 'main'])).toString().trim();
});
afterAll(async () => {
  git?.open();
  for (const child of children) child.kill('SIGKILL');
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});
beforeEach(async () => {
  git.open();
  await app.deps.db.deleteFrom('rate_limit_counters').execute();
});

const cacheRoot = () => path.join(app.storageDir, 'cache', 'archive');
const archiveUrl = (p: Project, suffix = '.tar', query = '') =>
  new URL(`/api/v4/projects/${p.id}/repository/archive${suffix}${query}`, app.baseUrl);

async function download(url: URL, headers: Record<string, string> = {}, method = 'GET') {
  const res = await fetch(url, { headers, method });
  return { res, bytes: Buffer.from(await res.arrayBuffer()) };
}

/**
 * What native `git archive` gives for the same commit, format and prefix, with the streaming
 * threshold Depot gives it (it changes how zip stores large files).
 */
const nativeArchive = async (repo: string, format: string, prefix: string, commit: string) =>
  (
    await exec(
      git.real,
      [
        `--git-dir=${repo}`,
        '-c',
        `core.bigFileThreshold=${INLINE_BLOB_BYTES}`,
        'archive',
        `--format=${format}`,
        `--prefix=${prefix}/`,
        commit,
      ],
      { env: gitEnvironment(), encoding: 'buffer', maxBuffer: 1 << 28 },
    )
  ).stdout;

/** The files in a project's cache folder, by kind. */
async function cacheFiles(projectId: number) {
  const names = await fs.readdir(path.join(cacheRoot(), String(projectId))).catch(() => [] as string[]);
  return {
    archives: names.filter((n) => /^[0-9a-f]{64}\.(tar|tar\.gz|tar\.bz2|zip)$/.test(n)),
    work: names.filter((n) => !/^[0-9a-f]{64}\.(tar|tar\.gz|tar\.bz2|zip)$/.test(n)),
  };
}

async function metric(name: string, labels = ''): Promise<number> {
  const text = await (await fetch(new URL('/-/metrics', app.baseUrl))).text();
  const escaped = `${name}${labels}`.replace(/[{}"=]/g, (c) => `\\${c}`);
  return Number(new RegExp(`^${escaped} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Runs curl; its exit code and output. */
function curl(args: string[]): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('curl', ['-sS', ...args], { stdio: ['ignore', 'pipe', 'ignore'] });
    let stdout = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout }));
  });
}

/** A download under way: its headers come with the first byte of the archive. */
function startDownload(url: URL, headers: Record<string, string> = {}) {
  return fetch(url, { headers }).then(async (res) => ({ res, bytes: Buffer.from(await res.arrayBuffer()) }));
}

/** Waits until the cache has counted `count` more requests of `result` than `before`. */
const cacheRequests = (result: string) => metric('depot_archive_cache_requests_total', `{result="${result}"}`);
async function counted(result: string, before: number, count: number): Promise<void> {
  await until(async () => (await cacheRequests(result)) >= before + count, `${count} ${result} request(s)`);
}

/** Another process reading the same archive through the cache code (test/support/archive-cache-client.ts). */
function otherProcess(variant: ArchiveVariant, p: Project, repo: string) {
  const output = path.join(scratch, `other-${randomBytes(4).toString('hex')}`);
  const request = JSON.stringify({ storageDir: app.storageDir, projectId: p.id, gitDir: repo, variant });
  const child = spawn(tsx, ['test/support/archive-cache-client.ts', request, output], {
    cwd: root,
    env: { PATH: process.env.PATH, HOME: process.env.HOME ?? '/tmp' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout?.on('data', (d) => {
    out += d;
  });
  child.stderr?.on('data', (d) => {
    err += d;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    output,
    /** Resolves with the origin it printed once its archive was open. */
    opened: until(async () => out.includes('\n'), `the other process to open its archive: ${err}`, 60_000).then(
      () => out.split('\n')[0],
    ),
    exited,
    stderr: () => err,
  };
}

describe('a cached archive', () => {
  it.each([
    ['.tar', 'tar'],
    ['.tar.gz', 'tar.gz'],
    ['.zip', 'zip'],
  ])('archive%s is byte-identical when generated, when cached, and to native git archive', async (suffix, format) => {
    const url = archiveUrl(project, suffix, '?sha=stable');
    const stable = (await gitIn(gitDir, ['rev-parse', 'stable'])).toString().trim();
    const prefix = `sample-stable-${stable}`;
    const native = await nativeArchive(gitDir, format, prefix, stable);

    const misses = await metric('depot_archive_cache_requests_total', '{result="miss"}');
    const fresh = await download(url);
    expect(fresh.res.status).toBe(200);
    expect(fresh.bytes.equals(native)).toBe(true);
    expect(await metric('depot_archive_cache_requests_total', '{result="miss"}')).toBe(misses + 1);

    const hits = await metric('depot_archive_cache_requests_total', '{result="hit"}');
    const cached = await download(url);
    expect(await metric('depot_archive_cache_requests_total', '{result="hit"}')).toBe(hits + 1);
    expect(cached.bytes.equals(native)).toBe(true);
    // GitLab's headers stay; a cached archive also has its length.
    expect(cached.res.headers.get('content-disposition')).toBe(`attachment; filename="${prefix}.${format}"`);
    expect(cached.res.headers.get('content-type')).toBe(
      format === 'zip' ? 'application/zip' : 'application/octet-stream',
    );
    expect(cached.res.headers.get('content-transfer-encoding')).toBe('binary');
    expect(cached.res.headers.get('content-length')).toBe(String(native.length));
    expect(cached.res.headers.get('cache-control')).toBe('max-age=60, public');
    expect(cached.res.headers.get('etag')).toBe(fresh.res.headers.get('etag'));

    // Emptied, the cache generates the same bytes again.
    await fs.rm(cacheRoot(), { recursive: true, force: true });
    const again = await download(url);
    expect(again.bytes.equals(native)).toBe(true);
  });

  it('is keyed by everything that changes its bytes', async () => {
    const tags = new Set<string>();
    for (const query of ['', '?sha=main', `?sha=${mainSha}`, '?path=docs', '?sha=stable']) {
      for (const suffix of ['.tar', '.zip']) {
        const { res } = await download(archiveUrl(project, suffix, query));
        expect(res.status).toBe(200);
        tags.add(res.headers.get('etag') as string);
      }
    }
    // `` and `?sha=main` are the same archive; the rest all differ.
    expect(tags.size).toBe(8);
    const byCommit = await download(archiveUrl(project, '.tar', `?sha=${mainSha}`));
    expect(byCommit.res.headers.get('cache-control')).toBe('max-age=3600, public');
  });

  it('follows the project’s LFS objects: one linked makes a new archive, unless include_lfs_blobs=false', async () => {
    const { project: p } = await makeSampleProject(app, owner.user);
    const etagOf = async (query = '') =>
      (await download(archiveUrl(p, '.tar', query), {}, 'HEAD')).res.headers.get('etag');
    const [withLfs, withoutLfs] = [await etagOf(), await etagOf('?include_lfs_blobs=false')];
    // Without objects, replacing pointers changes nothing: one archive.
    expect(withLfs).toBe(withoutLfs);
    await linkLfsObject(app.deps.db, p.id, 'c'.repeat(64), 10);
    expect(await etagOf()).not.toBe(withLfs);
    expect(await etagOf('?include_lfs_blobs=false')).toBe(withoutLfs);
    // Linking the same object again changes nothing.
    const linked = await etagOf();
    await linkLfsObject(app.deps.db, p.id, 'c'.repeat(64), 10);
    expect(await etagOf()).toBe(linked);
  });
});

describe('authorization before the cache', () => {
  it('never gives a private project’s cached archive to a caller without access, however asked', async () => {
    const { project: secret } = await makeSampleProject(app, owner.user, { visibility: 'private' });
    const url = archiveUrl(secret, '.tar');
    const member = await download(url, { 'PRIVATE-TOKEN': owner.token });
    expect(member.res.status).toBe(200);
    expect(member.res.headers.get('cache-control')).toBe('max-age=60, private');
    const etag = member.res.headers.get('etag') as string;
    expect((await cacheFiles(secret.id)).archives).toHaveLength(1);

    const stranger = await makeUserWithToken(app);
    const guest = await makeUserWithToken(app);
    await addMember(app, { type: 'project', id: secret.id }, guest.user, ROLES.guest);
    const askers: [string, Record<string, string>, number][] = [
      ['anonymous', {}, 404],
      ['a stranger', { 'PRIVATE-TOKEN': stranger.token }, 404],
      ['a guest', { 'PRIVATE-TOKEN': guest.token }, 403],
    ];
    for (const [who, auth, status] of askers) {
      const extras: Record<string, string>[] = [{}, { 'If-None-Match': etag }, { Range: 'bytes=0-99' }];
      for (const extra of extras) {
        for (const method of ['GET', 'HEAD']) {
          const { res, bytes } = await download(url, { ...auth, ...extra }, method);
          expect({ who, extra, method, status: res.status }).toEqual({ who, extra, method, status });
          expect(res.headers.get('etag')).toBeNull();
          expect(res.headers.get('content-disposition')).toBeNull();
          if (method === 'GET') expect(JSON.parse(bytes.toString()).message).toMatch(/^40[34] /);
        }
      }
    }
  });
});

describe('single flight', () => {
  it('starts one git archive for concurrent requests, each client reading it as it grows', async () => {
    const { project: p, gitDir: repo } = await makeSampleProject(app, owner.user);
    const url = archiveUrl(p, '.tar.gz');
    git.close();
    const before = git.archives().length;
    const [misses, joined] = [await cacheRequests('miss'), await cacheRequests('joined')];
    const downloads = Array.from({ length: 6 }, () => startDownload(url));
    await counted('miss', misses, 1);
    await counted('joined', joined, 5);
    expect(git.archives().length - before).toBe(1);
    git.open();
    const native = await nativeArchive(repo, 'tar.gz', `${p.path}-main-${mainSha}`, mainSha);
    for (const { res, bytes } of await Promise.all(downloads)) {
      expect(res.status).toBe(200);
      // Sent as it was generated: no length known up front.
      expect(res.headers.get('content-length')).toBeNull();
      expect(bytes.equals(native)).toBe(true);
    }
    // The claim went before the readers finished: only the archive is left.
    const left = await cacheFiles(p.id);
    expect(left.work).toEqual([]);
    expect(left.archives).toHaveLength(1);
    expect(git.archives().length - before).toBe(1);
  });

  it('across server processes: another process joins the generation in flight, one git archive in all', {
    timeout: 90_000,
  }, async () => {
    const { project: p, gitDir: repo } = await makeSampleProject(app, owner.user);
    const prefix = `${p.path}-main-${mainSha}`;
    const variant: ArchiveVariant = { commitId: mainSha, format: 'zip', path: '', prefix, lfs: null };
    git.close();
    const before = git.archives().length;
    const [misses, joined] = [await cacheRequests('miss'), await cacheRequests('joined')];
    const here = startDownload(archiveUrl(p, '.zip'));
    await counted('miss', misses, 1);
    const other = otherProcess(variant, p, repo);
    expect(await other.opened).toBe('joined');
    const alsoHere = startDownload(archiveUrl(p, '.zip'));
    await counted('joined', joined, 1);
    git.open();
    const native = await nativeArchive(repo, 'zip', prefix, mainSha);
    const [first, second] = await Promise.all([here, alsoHere]);
    // The route and the other process name the archive alike.
    expect(first.res.headers.get('etag')).toBe(`"${archiveKey(variant)}"`);
    expect(first.bytes.equals(native)).toBe(true);
    expect(second.bytes.equals(native)).toBe(true);
    expect(await other.exited).toBe(0);
    expect((await fs.readFile(other.output)).equals(native)).toBe(true);
    expect(git.archives().length - before).toBe(1);
  });

  it('a generation started by another process is served here once it has finished', {
    timeout: 90_000,
  }, async () => {
    const { project: p, gitDir: repo } = await makeSampleProject(app, owner.user);
    const prefix = `${p.path}-main-${mainSha}`;
    const variant: ArchiveVariant = { commitId: mainSha, format: 'tar', path: '', prefix, lfs: null };
    const before = git.archives().length;
    const other = otherProcess(variant, p, repo);
    expect(await other.opened).toBe('miss');
    expect(await other.exited).toBe(0);
    const hits = await metric('depot_archive_cache_requests_total', '{result="hit"}');
    const { res, bytes } = await download(archiveUrl(p, '.tar'));
    expect(res.headers.get('content-length')).toBe(String(bytes.length));
    expect(bytes.equals(await nativeArchive(repo, 'tar', prefix, mainSha))).toBe(true);
    expect(await metric('depot_archive_cache_requests_total', '{result="hit"}')).toBe(hits + 1);
    expect(git.archives().length - before).toBe(1);
  });
});

describe('a failed generation', () => {
  it('a killed git archive leaves nothing servable; its readers get 404 or are cut off, the next request generates again', {
    timeout: 60_000,
  }, async () => {
    // 24 MiB that gzip cannot shrink: git takes a while over it, long enough to be killed half-way.
    const p = await makeProject(app, owner.user, { path: 'noisy', visibility: 'public' });
    const repo = app.deps.storages.repositoryPath(p.repository_storage, p.id);
    const commit = await commitTree(repo, 'main', { 'noise.bin': { content: randomBytes(24 * 1024 * 1024) } });
    const url = archiveUrl(p, '.tar.gz');
    const native = await nativeArchive(repo, 'tar.gz', `noisy-main-${commit}`, commit);
    const before = git.archives().length;
    const partSize = async () => {
      const dir = path.join(cacheRoot(), String(p.id));
      const part = (await cacheFiles(p.id)).work.find((n) => n.endsWith('.part'));
      return part ? ((await fs.stat(path.join(dir, part)).catch(() => null))?.size ?? 0) : 0;
    };

    // Killed before its first byte: GitLab's 404 for every reader.
    git.close();
    const misses = await cacheRequests('miss');
    const early = [startDownload(url), startDownload(url)];
    await counted('miss', misses, 1);
    await until(async () => git.archives().length > before, 'git archive to start');
    process.kill(git.archives()[before] as number, 'SIGKILL');
    for (const { res, bytes } of await Promise.all(early)) {
      expect(res.status).toBe(404);
      expect(JSON.parse(bytes.toString())).toEqual({ message: '404 File Not Found' });
    }
    // The claim went before the partial file: by the time readers learn of the failure, nothing is left.
    expect(await cacheFiles(p.id)).toEqual({ archives: [], work: [] });

    // Killed half-way: the readers that had their first bytes are cut off.
    git.open();
    const late = await Promise.all([fetch(url), fetch(url)]);
    expect(late.map((res) => res.status)).toEqual([200, 200]);
    expect(await partSize()).toBeGreaterThan(0);
    process.kill(git.archives()[before + 1] as number, 'SIGKILL');
    for (const res of late) await expect(res.arrayBuffer()).rejects.toThrow();
    expect(await cacheFiles(p.id)).toEqual({ archives: [], work: [] });

    const { res, bytes } = await download(url);
    expect(res.status).toBe(200);
    expect(bytes.equals(native)).toBe(true);
    expect(git.archives().length - before).toBe(3);
  });

  it('a server process killed while generating leaves nothing servable; its claim is taken over', {
    timeout: 90_000,
  }, async () => {
    const { project: p, gitDir: repo } = await makeSampleProject(app, owner.user);
    const prefix = `${p.path}-main-${mainSha}`;
    const variant: ArchiveVariant = { commitId: mainSha, format: 'tar', path: '', prefix, lfs: null };
    git.close();
    const other = otherProcess(variant, p, repo);
    expect(await other.opened).toBe('miss');
    other.child.kill('SIGKILL');
    await other.exited;
    // What the dead process left: its claim and its partial file, nothing under the archive's name.
    const left = await cacheFiles(p.id);
    expect(left.archives).toEqual([]);
    expect(left.work.map((n) => n.replace(/\.[0-9a-f]{24}\.part$/, '.N.part')).sort()).toEqual([
      `${archiveKey(variant)}.tar.N.part`,
      `${archiveKey(variant)}.tar.lock`,
    ]);

    git.open();
    const { res, bytes } = await download(archiveUrl(p, '.tar'));
    expect(res.status).toBe(200);
    expect(bytes.equals(await nativeArchive(repo, 'tar', prefix, mainSha))).toBe(true);
    await until(async () => (await cacheFiles(p.id)).work.length === 0, 'the dead claim to go');
    expect((await cacheFiles(p.id)).archives).toEqual([`${archiveKey(variant)}.tar`]);
  });
});

describe('conditional and range requests on archives', () => {
  let url: URL;
  let full: Buffer;
  let etag: string;

  beforeAll(async () => {
    const { project: p } = await makeSampleProject(app, owner.user);
    url = archiveUrl(p, '.tar');
    const first = await download(url);
    full = first.bytes;
    etag = first.res.headers.get('etag') as string;
  });

  it('answers If-None-Match with 304, HEAD with the headers and the length', async () => {
    expect(etag).toMatch(/^"[0-9a-f]{64}"$/);
    for (const tag of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      const { res, bytes } = await download(url, { 'If-None-Match': tag });
      expect({ tag, status: res.status }).toEqual({ tag, status: 304 });
      expect(bytes.length).toBe(0);
      expect(res.headers.get('etag')).toBe(etag);
      expect(res.headers.get('cache-control')).toBe('max-age=60, public');
    }
    expect((await download(url, { 'If-None-Match': '"other"' })).res.status).toBe(200);
    const head = await download(url, {}, 'HEAD');
    expect(head.res.status).toBe(200);
    expect(head.res.headers.get('content-length')).toBe(String(full.length));
    expect(head.res.headers.get('accept-ranges')).toBe('bytes');
    expect(head.res.headers.get('etag')).toBe(etag);
    expect(head.bytes.length).toBe(0);
  });

  it('answers one Range with 206, past the end with 416, and a stale If-Range in full', async () => {
    const cases: [string, number, number][] = [
      ['bytes=0-99', 0, 99],
      ['bytes=100-', 100, full.length - 1],
      ['bytes=-50', full.length - 50, full.length - 1],
      [`bytes=10-${full.length + 1000}`, 10, full.length - 1],
    ];
    for (const [range, start, end] of cases) {
      const { res, bytes } = await download(url, { Range: range });
      expect({ range, status: res.status }).toEqual({ range, status: 206 });
      expect(res.headers.get('content-range')).toBe(`bytes ${start}-${end}/${full.length}`);
      expect(res.headers.get('content-length')).toBe(String(end - start + 1));
      expect(bytes.equals(full.subarray(start, end + 1))).toBe(true);
    }
    const past = await download(url, { Range: `bytes=${full.length}-` });
    expect(past.res.status).toBe(416);
    expect(past.res.headers.get('content-range')).toBe(`bytes */${full.length}`);
    const stale = await download(url, { Range: 'bytes=0-9', 'If-Range': '"other"' });
    expect(stale.res.status).toBe(200);
    expect(stale.bytes.equals(full)).toBe(true);
    const current = await download(url, { Range: 'bytes=0-9', 'If-Range': etag });
    expect(current.res.status).toBe(206);
    // Several ranges are answered whole.
    expect((await download(url, { Range: 'bytes=0-1,5-6' })).res.status).toBe(200);
  });

  it('answers a Range on an archive not cached yet once it is generated', async () => {
    const { project: p, gitDir: repo } = await makeSampleProject(app, owner.user);
    const native = await nativeArchive(repo, 'tar', `${p.path}-main-${mainSha}`, mainSha);
    const { res, bytes } = await download(archiveUrl(p, '.tar'), { Range: 'bytes=1000-' });
    expect(res.status).toBe(206);
    expect(res.headers.get('content-range')).toBe(`bytes 1000-${native.length - 1}/${native.length}`);
    expect(bytes.equals(native.subarray(1000))).toBe(true);
  });

  it('lets curl -C - resume an interrupted download into the whole archive', { timeout: 60_000 }, async () => {
    const p = await makeProject(app, owner.user, { path: 'big', visibility: 'public' });
    const repo = app.deps.storages.repositoryPath(p.repository_storage, p.id);
    const commit = await commitTree(repo, 'main', { 'noise.bin': { content: randomBytes(3 * 1024 * 1024) } });
    const target = archiveUrl(p, '.tar.gz');
    const file = path.join(scratch, 'resumed.tar.gz');
    // A download cut off part-way: the connection drops after the first 64 KiB or so.
    const abort = new AbortController();
    const res = await fetch(target, { signal: abort.signal });
    const kept: Buffer[] = [];
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      kept.push(Buffer.from(chunk));
      if (Buffer.concat(kept).length > 64 * 1024) break;
    }
    abort.abort();
    await fs.writeFile(file, Buffer.concat(kept));
    const partial = (await fs.stat(file)).size;
    expect(partial).toBeLessThan(3 * 1024 * 1024);
    const resumed = await curl(['-f', '-C', '-', '-o', file, '-w', '%{http_code}', target.href]);
    expect(resumed).toEqual({ code: 0, stdout: '206' });
    const whole = await fs.readFile(file);
    expect(whole.length).toBeGreaterThan(partial);
    expect(whole.equals(await nativeArchive(repo, 'tar.gz', `big-main-${commit}`, commit))).toBe(true);
  });
});

describe('project deletion', () => {
  it('deletes the project’s cached archives through a job', async () => {
    const { project: p } = await makeSampleProject(app, owner.user);
    await download(archiveUrl(p, '.zip'));
    await download(archiveUrl(p, '.tar'));
    expect((await cacheFiles(p.id)).archives).toHaveLength(2);
    const deleted = await app.request(`/projects/${p.id}`, { method: 'DELETE', token: owner.token });
    expect(deleted.status).toBe(202);
    // Gone from the API at once, so nothing reaches a client; the files go with the job.
    expect((await download(archiveUrl(p, '.zip'))).res.status).toBe(404);
    const evicted = await metric('depot_archive_cache_evictions_total', '{reason="project"}');
    expect(await new Worker(app.deps, JOB_KINDS).drain()).toBeGreaterThanOrEqual(1);
    await expect(fs.access(path.join(cacheRoot(), String(p.id)))).rejects.toThrow();
    expect(await metric('depot_archive_cache_evictions_total', '{reason="project"}')).toBe(evicted + 2);
  });
});

describe('the age-based clean-up job', () => {
  it('deletes archives made over two hours ago and what dead generations left, and queues its next hourly run', async () => {
    const { project: p } = await makeSampleProject(app, owner.user);
    await download(archiveUrl(p, '.zip'));
    await download(archiveUrl(p, '.tar'));
    const [oldArchive, freshArchive] = (await cacheFiles(p.id)).archives as [string, string];
    const dir = path.join(cacheRoot(), String(p.id));
    const now = app.clock.now();
    const longAgo = new Date(now.getTime() - 121 * 60 * 1000);
    await fs.utimes(path.join(dir, oldArchive), longAgo, longAgo);
    for (const leftover of [`${'a'.repeat(64)}.tar.0123456789abcdef01234567.part`, `${'a'.repeat(64)}.tar.lock`]) {
      await fs.writeFile(path.join(dir, leftover), 'left by a crash');
      await fs.utimes(path.join(dir, leftover), longAgo, longAgo);
    }
    const emptyDir = path.join(cacheRoot(), '999999');
    await fs.mkdir(emptyDir);

    // A worker's start queues the first run (the chain then keeps itself going).
    const worker = new Worker(app.deps, JOB_KINDS);
    await app.deps.db.deleteFrom('jobs').where('kind', '=', ARCHIVE_CACHE_CLEANUP_SCHEDULE.kind).execute();
    await worker.drain({ recover: true });
    const queued = await app.deps.db
      .selectFrom('jobs')
      .select(['id', 'run_at'])
      .where('kind', '=', ARCHIVE_CACHE_CLEANUP_SCHEDULE.kind)
      .where('state', '=', 'queued')
      .execute();
    expect(queued).toHaveLength(1);
    expect(new Date(queued[0]?.run_at as Date).getUTCMinutes()).toBe(0);
    await app.deps.db
      .updateTable('jobs')
      .set({ run_at: new Date(Date.now() - 1000) })
      .where('id', '=', queued[0]?.id as number)
      .execute();
    const evicted = await metric('depot_archive_cache_evictions_total', '{reason="age"}');
    expect(await worker.drain()).toBe(1);

    expect(await cacheFiles(p.id)).toEqual({ archives: [freshArchive], work: [] });
    await expect(fs.access(emptyDir)).rejects.toThrow();
    expect(await metric('depot_archive_cache_evictions_total', '{reason="age"}')).toBe(evicted + 1);
    const next = await app.deps.db
      .selectFrom('jobs')
      .select('run_at')
      .where('kind', '=', ARCHIVE_CACHE_CLEANUP_SCHEDULE.kind)
      .where('state', '=', 'queued')
      .execute();
    expect(next).toHaveLength(1);
  });
});

describe('the size bound', () => {
  let small: TestApp;
  afterAll(async () => {
    await small?.close();
  });

  it('deletes the least recently used archives once the cache is over ARCHIVE_CACHE_MAX', async () => {
    // Three branches whose tar archives have one size: two fit in the bound, three do not.
    const fixture = path.join(scratch, 'three.git');
    await exec('git', ['init', '--bare', '-q', fixture]);
    const commits: Record<string, string> = {};
    for (const branch of ['a', 'b', 'c']) {
      commits[branch] = await commitTree(fixture, branch, { 'data.bin': { content: randomBytes(200_000) } });
    }
    const size = (await nativeArchive(fixture, 'tar', `lru-a-${commits.a}`, commits.a as string)).length;
    small = await startTestApp({ env: { ARCHIVE_CACHE_MAX: String(Math.floor(size * 2.5)) } });
    const { user } = await makeUserWithToken(small);
    const p = await makeProject(small, user, { path: 'lru', visibility: 'public' });
    const repo = small.deps.storages.repositoryPath(p.repository_storage, p.id);
    await fs.rm(repo, { recursive: true, force: true });
    await fs.cp(fixture, repo, { recursive: true });
    const dir = path.join(small.storageDir, 'cache', 'archive', String(p.id));
    const get = async (branch: string) => {
      const res = await fetch(new URL(`/api/v4/projects/${p.id}/repository/archive.tar?sha=${branch}`, small.baseUrl));
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      return res.headers.get('etag')?.slice(1, -1) as string;
    };
    const names = async () => (await fs.readdir(dir)).filter((n) => n.endsWith('.tar')).sort();

    const a = await get('a');
    await new Promise((r) => setTimeout(r, 20));
    const b = await get('b');
    await new Promise((r) => setTimeout(r, 20));
    await get('a'); // a is used again: b is now the least recently used
    await new Promise((r) => setTimeout(r, 20));
    const c = await get('c');
    await until(async () => (await names()).length === 2, 'the cache to shrink to its bound');
    expect(await names()).toEqual([`${a}.tar`, `${c}.tar`].sort());
    const text = await (await fetch(new URL('/-/metrics', small.baseUrl))).text();
    expect(text).toMatch(/^depot_archive_cache_evictions_total\{reason="size"\} 1$/m);
    expect(text).toMatch(new RegExp(`^depot_archive_cache_bytes ${2 * size}$`, 'm'));
    expect(text).toMatch(/^depot_archive_cache_files 2$/m);
    // An evicted archive is generated again, the same bytes.
    expect(await get('b')).toBe(b);
  });

  it('ARCHIVE_CACHE_MAX=0 turns the cache off: archives stream from git, nothing is kept', async () => {
    const off = await startTestApp({ env: { ARCHIVE_CACHE_MAX: '0' } });
    try {
      const { user } = await makeUserWithToken(off);
      const { project: p, gitDir: repo } = await makeSampleProject(off, user);
      const res = await fetch(new URL(`/api/v4/projects/${p.id}/repository/archive.tar`, off.baseUrl));
      const bytes = Buffer.from(await res.arrayBuffer());
      expect(bytes.equals(await nativeArchive(repo, 'tar', `${p.path}-main-${mainSha}`, mainSha))).toBe(true);
      expect(res.headers.get('etag')).toMatch(/^"[0-9a-f]{64}"$/);
      expect(res.headers.get('accept-ranges')).toBeNull();
      await expect(fs.access(path.join(off.storageDir, 'cache', 'archive'))).rejects.toThrow();
    } finally {
      await off.close();
    }
  });
});
