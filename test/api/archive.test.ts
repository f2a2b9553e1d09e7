import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { linkLfsObject } from '../../src/db/queries/lfs.js';
import type { Project } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { addMember, makeSampleProject, makeUserWithToken, ROLES } from '../support/factories.js';
import { BZIP2, lacks, UNZIP } from '../support/programs.js';

const exec = promisify(execFile);
/** The server compresses .tar.bz2 with bzip2; the tests open zips with unzip. */
const noArchivers = lacks(BZIP2, UNZIP);
const git = async (gitDir: string, ...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8' })).stdout.trim();

let app: TestApp;
let scratch: string;
let owner: { token: string };
let project: Project;
let gitDir: string;
let mainSha: string;

beforeAll(async () => {
  app = await startTestApp();
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-archive-'));
  const made = await makeUserWithToken(app);
  owner = made;
  ({ project, gitDir } = await makeSampleProject(app, made.user, { path: 'sample' }));
  mainSha = await git(gitDir, 'rev-parse', 'main');
});
afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});
beforeEach(async () => {
  // Every test starts with a fresh rate-limit window.
  await app.deps.db.deleteFrom('rate_limit_counters').execute();
});

async function download(target: string, headers: Record<string, string> = {}) {
  const res = await fetch(new URL(`/api/v4${target}`, app.baseUrl), { headers });
  return { res, bytes: Buffer.from(await res.arrayBuffer()) };
}

/** Every regular file and symlink under `dir`, as relative path → sha256 of bytes (or link target). */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (rel: string) => {
    for (const entry of await fs.readdir(path.join(dir, rel), { withFileTypes: true })) {
      const relPath = path.posix.join(rel, entry.name);
      const full = path.join(dir, relPath);
      if (entry.isDirectory()) await walk(relPath);
      else if (entry.isSymbolicLink()) out[relPath] = `link:${await fs.readlink(full)}`;
      else
        out[relPath] = createHash('sha256')
          .update(await fs.readFile(full))
          .digest('hex');
    }
  };
  await walk('');
  return out;
}

/** What native `git archive` puts in the tree for the same commit and prefix. */
async function expected(
  commit: string,
  prefix: string,
  pathspec?: string,
  repo = gitDir,
): Promise<Record<string, string>> {
  const dir = await fs.mkdtemp(path.join(scratch, 'expected-'));
  const tarFile = path.join(dir, '..', `${path.basename(dir)}.tar`);
  await exec(
    'git',
    [
      `--git-dir=${repo}`,
      'archive',
      '--format=tar',
      `--prefix=${prefix}/`,
      `--output=${tarFile}`,
      commit,
      ...(pathspec ? ['--', pathspec] : []),
    ],
    { env: gitEnvironment() },
  );
  await exec('tar', ['-xf', tarFile, '-C', dir]);
  return snapshot(dir);
}

async function extract(bytes: Buffer, kind: 'tar' | 'zip'): Promise<Record<string, string>> {
  const dir = await fs.mkdtemp(path.join(scratch, 'got-'));
  const file = `${dir}.${kind === 'zip' ? 'zip' : 'archive'}`;
  await fs.writeFile(file, bytes);
  if (kind === 'zip') await exec('unzip', ['-q', file, '-d', dir]);
  else await exec('tar', ['-xf', file, '-C', dir]); // GNU tar detects gzip and bzip2 itself
  return snapshot(dir);
}

describe.skipIf(noArchivers)('GET /projects/:id/repository/archive', () => {
  const formats: [suffix: string, ext: string, magic: string, kind: 'tar' | 'zip'][] = [
    ['', 'tar.gz', '1f8b', 'tar'],
    ['.tar.gz', 'tar.gz', '1f8b', 'tar'],
    ['.tgz', 'tar.gz', '1f8b', 'tar'],
    ['.gz', 'tar.gz', '1f8b', 'tar'],
    ['.tar.bz2', 'tar.bz2', '425a68', 'tar'],
    ['.tbz', 'tar.bz2', '425a68', 'tar'],
    ['.tbz2', 'tar.bz2', '425a68', 'tar'],
    ['.tb2', 'tar.bz2', '425a68', 'tar'],
    ['.bz2', 'tar.bz2', '425a68', 'tar'],
    ['.tar', 'tar', '', 'tar'],
    ['.zip', 'zip', '504b0304', 'zip'],
  ];

  it.each(formats)(
    'archive%s holds what git archive holds, under <path>-<ref>-<sha>',
    async (suffix, ext, magic, kind) => {
      const prefix = `sample-main-${mainSha}`;
      const { res, bytes } = await download(`/projects/${project.id}/repository/archive${suffix}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-disposition')).toBe(`attachment; filename="${prefix}.${ext}"`);
      expect(res.headers.get('content-type')).toBe(kind === 'zip' ? 'application/zip' : 'application/octet-stream');
      expect(res.headers.get('content-transfer-encoding')).toBe('binary');
      expect(bytes.subarray(0, magic.length / 2).toString('hex')).toBe(magic);
      if (ext === 'tar') expect(bytes.subarray(257, 262).toString('latin1')).toBe('ustar');
      const got = await extract(bytes, kind);
      expect(Object.keys(got).every((f) => f.startsWith(`${prefix}/`))).toBe(true);
      expect(got).toEqual(await expected(mainSha, prefix));
    },
  );

  it('names archives of branches with slashes, tags and full shas as GitLab does', async () => {
    const commits = await git(gitDir, 'rev-parse', 'feature/merge-me');
    const byBranch = await download(`/projects/${project.id}/repository/archive.tar?sha=feature%2Fmerge-me`);
    expect(byBranch.res.headers.get('content-disposition')).toBe(
      `attachment; filename="sample-feature-merge-me-${commits}.tar"`,
    );
    expect(await extract(byBranch.bytes, 'tar')).toEqual(await expected(commits, `sample-feature-merge-me-${commits}`));

    const tagCommit = await git(gitDir, 'rev-parse', 'v1.0.0^{commit}');
    const byTag = await download(`/projects/${project.id}/repository/archive.zip?sha=v1.0.0`);
    expect(byTag.res.headers.get('content-disposition')).toBe(`attachment; filename="sample-v1.0.0-${tagCommit}.zip"`);
    expect(await extract(byTag.bytes, 'zip')).toEqual(await expected(tagCommit, `sample-v1.0.0-${tagCommit}`));

    const bySha = await download(`/projects/${project.id}/repository/archive.tar?sha=${tagCommit}`);
    expect(bySha.res.headers.get('content-disposition')).toBe(
      `attachment; filename="sample-${tagCommit}-${tagCommit}.tar"`,
    );
  });

  it('archives one folder with `path`, kept at its place under the prefix', async () => {
    const { res, bytes } = await download(`/projects/${project.id}/repository/archive.tar?path=docs`);
    expect(res.status).toBe(200);
    const prefix = `sample-main-${mainSha}-docs`;
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="${prefix}.tar"`);
    const got = await extract(bytes, 'tar');
    expect(Object.keys(got).length).toBeGreaterThan(0);
    expect(Object.keys(got).every((f) => f.startsWith(`${prefix}/docs/`))).toBe(true);
    expect(got).toEqual(await expected(mainSha, prefix, 'docs'));
  });

  it('answers 404 File Not Found for unknown refs, paths and hostile values, and runs nothing', async () => {
    const marker = path.join(scratch, 'pwned');
    const bad = [
      'sha=does-not-exist',
      'sha=0123456789abcdef0123456789abcdef01234567',
      `sha=${encodeURIComponent(`--output=${marker}`)}`,
      'sha=main%0Aother',
      'sha=main..stable',
      'path=no-such-folder',
      'path=..%2F..%2Fetc',
      `path=${encodeURIComponent(`--output=${marker}`)}`,
    ];
    for (const query of bad) {
      const res = await app.request(`/projects/${project.id}/repository/archive.tar?${query}`);
      expect({ query, status: res.status, body: res.body }).toEqual({
        query,
        status: 404,
        body: { message: '404 File Not Found' },
      });
    }
    await expect(fs.access(marker)).rejects.toThrow();
    const nul = await app.request(`/projects/${project.id}/repository/archive.tar?sha=main%00x`);
    expect(nul.status).toBe(400);
    const format = await app.request(`/projects/${project.id}/repository/archive.rar`);
    expect(format.status).toBe(404);
  });

  it('refuses hotlinking with 406', async () => {
    const embeds = [
      { Accept: 'image/png,*/*;q=0.8' },
      { 'Sec-Fetch-Mode': 'no-cors' },
      { Accept: 'text/css' },
      { Accept: 'not a media type' },
    ];
    for (const headers of embeds) {
      // node:http, because fetch forbids setting Sec-Fetch-* headers itself.
      const status = await new Promise<number | undefined>((resolve, reject) => {
        http
          .get(new URL(`/api/v4/projects/${project.id}/repository/archive.zip`, app.baseUrl), { headers }, (res) => {
            res.resume();
            resolve(res.statusCode);
          })
          .on('error', reject);
      });
      expect({ headers, status }).toEqual({ headers, status: 406 });
    }
    const { res } = await download(`/projects/${project.id}/repository/archive.zip`, {
      Accept: 'text/html,application/xhtml+xml,*/*;q=0.8',
      'Sec-Fetch-Mode': 'navigate',
    });
    expect(res.status).toBe(200);
  });
});

describe('archive access', () => {
  it('lets anonymous callers download public repositories, and follows read_code on private ones', async () => {
    const { user, token } = await makeUserWithToken(app);
    const { project: secret } = await makeSampleProject(app, (await makeUserWithToken(app)).user, {
      visibility: 'private',
    });
    const anonymousPublic = await download(`/projects/${project.id}/repository/archive.zip`);
    expect(anonymousPublic.res.status).toBe(200);

    const url = `/projects/${secret.id}/repository/archive.zip`;
    expect((await app.request(url)).body).toEqual({ message: '404 Project Not Found' });
    expect((await app.request(url, { token })).status).toBe(404);
    await addMember(app, { type: 'project', id: secret.id }, user, ROLES.guest);
    expect((await app.request(url, { token })).body).toEqual({ message: '403 Forbidden' });
    await app.deps.db
      .updateTable('members')
      .set({ access_level: ROLES.reporter })
      .where('user_id', '=', user.id)
      .execute();
    const asReporter = await download(url, { 'PRIVATE-TOKEN': token });
    expect(asReporter.res.status).toBe(200);
  });
});

describe('archive rate limit', () => {
  it('allows 5 archives a minute per user and project, then 429 with GitLab’s body and headers', async () => {
    const url = `/projects/${project.id}/repository/archive.tar`;
    app.clock.set('2026-01-05T10:00:10.000Z');
    for (let i = 1; i <= 5; i++) {
      const { res } = await download(url, { 'PRIVATE-TOKEN': owner.token });
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-name')).toBe('project_repositories_archive');
      expect(res.headers.get('ratelimit-limit')).toBe('5');
      expect(res.headers.get('ratelimit-observed')).toBe(String(i));
      expect(res.headers.get('ratelimit-remaining')).toBe(String(5 - i));
      expect(res.headers.get('ratelimit-reset')).toBe(String(Date.parse('2026-01-05T10:01:00Z') / 1000));
    }
    const limited = await app.request(url, { token: owner.token });
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({
      message: { error: 'This archive has been requested too many times. Try again later.' },
    });
    expect(limited.headers.get('retry-after')).toBe('50');
    expect(limited.headers.get('ratelimit-remaining')).toBe('0');
    expect(limited.headers.get('ratelimit-resettime')).toBe('Mon, 05 Jan 2026 10:01:00 GMT');

    // Another user, or the same user on another project, has a budget of their own.
    const other = await makeUserWithToken(app);
    expect((await download(url, { 'PRIVATE-TOKEN': other.token })).res.status).toBe(200);
    const { project: second } = await makeSampleProject(app, other.user);
    expect(
      (await download(`/projects/${second.id}/repository/archive.tar`, { 'PRIVATE-TOKEN': owner.token })).res.status,
    ).toBe(200);

    // A new window opens at the next minute.
    app.clock.advance(50_000);
    expect((await download(url, { 'PRIVATE-TOKEN': owner.token })).res.status).toBe(200);
  });

  it('gives anonymous callers GitLab’s threshold of 100, and admins can change the user threshold', async () => {
    const url = `/projects/${project.id}/repository/archive.tar`;
    const anonymous = await download(url);
    expect(anonymous.res.headers.get('ratelimit-limit')).toBe('100');

    await app.deps.db
      .insertInto('application_settings')
      .values({ key: 'rate_limits', value: JSON.stringify({ project_repositories_archive: 2 }) })
      .execute();
    try {
      expect((await download(url, { 'PRIVATE-TOKEN': owner.token })).res.status).toBe(200);
      expect((await download(url, { 'PRIVATE-TOKEN': owner.token })).res.status).toBe(200);
      expect((await app.request(url, { token: owner.token })).status).toBe(429);
    } finally {
      await app.deps.db.deleteFrom('application_settings').where('key', '=', 'rate_limits').execute();
    }
  });
});

describe.skipIf(noArchivers)('Git LFS objects in archives', () => {
  let lfsProject: Project;
  let lfsGitDir: string;
  const content = Buffer.from('the real bytes of a large asset\n'.repeat(1000));
  const oid = createHash('sha256').update(content).digest('hex');
  const pointer = `version https://git-lfs.github.com/spec/v1\noid sha256:${oid}\nsize ${content.length}\n`;

  beforeAll(async () => {
    const { user } = await makeUserWithToken(app);
    ({ project: lfsProject, gitDir: lfsGitDir } = await makeSampleProject(app, user, { path: 'assets' }));
    // Commit a pointer file on main with plumbing, as a git-lfs client's push would leave it.
    const blob = (
      await exec('sh', ['-c', `printf '%s' "$0" | git --git-dir="$1" hash-object -w --stdin`, pointer, lfsGitDir], {
        env: gitEnvironment(),
      })
    ).stdout.trim();
    const index = path.join(scratch, 'lfs-index');
    const env = { ...gitEnvironment(), GIT_INDEX_FILE: index };
    const gitEnv = (...args: string[]) =>
      exec('git', [`--git-dir=${lfsGitDir}`, ...args], { env, encoding: 'utf8' }).then((r) => r.stdout.trim());
    await gitEnv('read-tree', 'main');
    await gitEnv('update-index', '--add', '--cacheinfo', `100644,${blob},assets/big.bin`);
    const tree = await gitEnv('write-tree');
    const commit = await exec(
      'git',
      [`--git-dir=${lfsGitDir}`, 'commit-tree', tree, '-p', 'main', '-m', 'Add an LFS asset'],
      {
        env: {
          ...env,
          GIT_AUTHOR_NAME: 'A',
          GIT_AUTHOR_EMAIL: 'a@example.com',
          GIT_COMMITTER_NAME: 'A',
          GIT_COMMITTER_EMAIL: 'a@example.com',
        },
        encoding: 'utf8',
      },
    );
    await gitEnv('update-ref', 'refs/heads/main', commit.stdout.trim());
  });

  async function bigFile(format: 'tar' | 'zip' | 'tar.gz' | 'tar.bz2', query = '') {
    const { res, bytes } = await download(`/projects/${lfsProject.id}/repository/archive.${format}${query}`);
    expect(res.status).toBe(200);
    const files = await extract(bytes, format === 'zip' ? 'zip' : 'tar');
    const name = Object.keys(files).find((f) => f.endsWith('/assets/big.bin')) as string;
    expect(name).toBeDefined();
    return { hash: files[name], files };
  }
  const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

  it('leaves pointers alone while the project has no stored object', async () => {
    expect((await bigFile('tar')).hash).toBe(sha(pointer));
  });

  it('replaces pointers by stored objects in every format, unless include_lfs_blobs=false', async () => {
    const file = app.deps.storages.lfsObjectPath(lfsProject.repository_storage, oid);
    await fs.mkdir(path.dirname(file), { recursive: true });
    await fs.writeFile(file, content);
    await linkLfsObject(app.deps.db, lfsProject.id, oid, content.length);

    const head = await git(lfsGitDir, 'rev-parse', 'main');
    const reference = await expected(head, `assets-main-${head}`, undefined, lfsGitDir);
    for (const format of ['tar', 'zip', 'tar.gz', 'tar.bz2'] as const) {
      await app.deps.db.deleteFrom('rate_limit_counters').execute();
      const { hash, files } = await bigFile(format);
      expect({ format, hash }).toEqual({ format, hash: sha(content) });
      // Everything else is byte for byte what git archive gives.
      const rest = { ...files };
      const others = { ...reference };
      for (const f of Object.keys(rest)) if (f.endsWith('/assets/big.bin')) delete rest[f];
      for (const f of Object.keys(others)) if (f.endsWith('/assets/big.bin')) delete others[f];
      expect(rest).toEqual(others);
    }
    expect((await bigFile('tar', '?include_lfs_blobs=false')).hash).toBe(sha(pointer));
  });
});

describe.skipIf(noArchivers)('archives through a GitLab client library', () => {
  it('downloads a zip with @gitbeaker/rest', async () => {
    const client = new Gitlab({ host: app.baseUrl, token: owner.token });
    const blob = (await client.Repositories.showArchive(project.id, { fileType: 'zip', sha: 'stable' })) as Blob;
    const bytes = Buffer.from(await blob.arrayBuffer());
    const stable = await git(gitDir, 'rev-parse', 'stable');
    expect(await extract(bytes, 'zip')).toEqual(await expected(stable, `sample-stable-${stable}`));
  });
});
