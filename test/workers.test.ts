import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { gatedGit } from './support/gated-git.js';
import { runGitClient } from './support/git-client.js';
import { type ServerProcess, startServerProcess, tempStorageDir } from './support/server-process.js';

/**
 * WORKERS=2 on the embedded database: two server processes on one port (node:cluster) share
 * the database, the storages, the jobs and the archive cache, and what each keeps in memory
 * stays true.
 */
const TOKEN = 'glpat-workers-test-token-012345678';
const dirs: string[] = [];
let server: ServerProcess | undefined;

afterAll(async () => {
  await server?.crash();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  body: any;
}

/** One request on a connection of its own, so that the cluster hands it to either process. */
function call(base: string, method: string, route: string, token: string, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      `${base}/api/v4${route}`,
      {
        method,
        agent: false,
        headers: {
          'PRIVATE-TOKEN': token,
          ...(payload ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => {
          text += d;
        });
        res.on('end', () => resolve({ status: res.statusCode as number, body: text ? JSON.parse(text) : undefined }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** A whole body on a connection of its own. */
function download(base: string, route: string, token: string): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    http
      .get(`${base}/api/v4${route}`, { agent: false, headers: { 'PRIVATE-TOKEN': token } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => resolve({ status: res.statusCode as number, body: Buffer.concat(chunks) }));
      })
      .on('error', reject);
  });
}

/** The processes that answered `route` with `status`, read off the request log lines since `from`. */
function servedBy(output: string, from: number, route: string, status: number): Set<number> {
  const pids = new Set<number>();
  for (const line of output.slice(from).split('\n')) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { msg?: string; path?: string; status?: number; pid?: number };
    if (entry.msg === 'request' && entry.path === route && entry.status === status && entry.pid) pids.add(entry.pid);
  }
  return pids;
}

describe('WORKERS=2', () => {
  it('share one instance: requests, tokens, writes, pushes and jobs, and stop together', {
    timeout: 300_000,
  }, async () => {
    const storage = tempStorageDir('depot-workers-');
    dirs.push(storage);
    // Every `git archive` of both processes is logged, and waits while the gate is closed.
    const git = gatedGit(storage);
    const roots = { default: path.join(storage, 'repos', 'default'), second: path.join(storage, 'repos', 'second') };
    server = await startServerProcess({
      STORAGE_DIR: storage,
      WORKERS: '2',
      LOG_LEVEL: 'info',
      ADMIN_TOKEN: TOKEN,
      ADMIN_PASSWORD: 'a-long-admin-password',
      REPOSITORY_STORAGES: `default=${roots.default},second=${roots.second}`,
      PATH: `${git.bin}:${process.env.PATH}`,
    });
    const { base } = server;

    // Both processes answer, on one port (the second may still be starting when the first is ready).
    let mark = server.output().length;
    for (let i = 0; i < 300 && servedBy(server.output(), mark, '/api/v4/user', 200).size < 2; i++) {
      expect((await call(base, 'GET', '/user', TOKEN)).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(servedBy(server.output(), mark, '/api/v4/user', 200).size).toBe(2);

    // A token revoked through one process is refused by both within a second.
    const root = (await call(base, 'GET', '/user', TOKEN)).body as { id: number };
    const made = await call(base, 'POST', `/users/${root.id}/personal_access_tokens`, TOKEN, {
      name: 'short-lived',
      scopes: ['api'],
    });
    expect(made.status).toBe(201);
    for (let i = 0; i < 10; i++) expect((await call(base, 'GET', '/user', made.body.token)).status).toBe(200);
    expect((await call(base, 'DELETE', `/personal_access_tokens/${made.body.id}`, TOKEN)).status).toBe(204);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    mark = server.output().length;
    for (let i = 0; i < 20; i++) expect((await call(base, 'GET', '/user', made.body.token)).status).toBe(401);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(servedBy(server.output(), mark, '/api/v4/user', 401).size).toBe(2);

    // Concurrent API commits and pushes through both processes: nothing lost.
    const project = await call(base, 'POST', '/projects', TOKEN, { name: 'shared', initialize_with_readme: true });
    expect(project.status).toBe(201);
    const id = project.body.id as number;
    const commits = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        call(base, 'POST', `/projects/${id}/repository/commits`, TOKEN, {
          branch: `api-${i}`,
          start_branch: 'main',
          commit_message: `api ${i}`,
          actions: [{ action: 'create', file_path: `api-${i}.txt`, content: `${i}\n` }],
        }),
      ),
    );
    expect(commits.map((c) => c.status)).toEqual(commits.map(() => 201));
    const scratch = tempStorageDir('depot-workers-clone-');
    dirs.push(scratch);
    const remote = new URL(`/root/shared.git`, base);
    remote.username = 'root';
    remote.password = TOKEN;
    expect((await runGitClient(['clone', '-q', remote.toString(), 'work'], scratch)).code).toBe(0);
    const work = path.join(scratch, 'work');
    const pushed: Record<string, string> = {};
    for (let i = 0; i < 6; i++) {
      fs.writeFileSync(path.join(work, `push-${i}.txt`), `${i}\n`);
      await runGitClient(['checkout', '-q', '-b', `push-${i}`, 'origin/main'], work);
      await runGitClient(['add', `push-${i}.txt`], work);
      await runGitClient(['commit', '-q', '-m', `push ${i}`], work);
      pushed[`push-${i}`] = (await runGitClient(['rev-parse', 'HEAD'], work)).stdout.trim();
    }
    const pushes = await Promise.all(
      Object.keys(pushed).map((branch) => runGitClient(['push', '-q', 'origin', `${branch}:${branch}`], work)),
    );
    expect(
      pushes.map((p) => p.code),
      pushes.map((p) => p.stderr).join('\n'),
    ).toEqual(pushes.map(() => 0));
    const branches = await call(base, 'GET', `/projects/${id}/repository/branches?per_page=100`, TOKEN);
    const tips = new Map(
      (branches.body as { name: string; commit: { id: string } }[]).map((b) => [b.name, b.commit.id]),
    );
    for (const [i, c] of commits.entries()) expect(tips.get(`api-${i}`)).toBe(c.body.id);
    for (const [branch, sha] of Object.entries(pushed)) expect(tips.get(branch)).toBe(sha);

    // A storage move scheduled through one process is carried out by the shared job queue.
    const move = await call(base, 'POST', `/projects/${id}/repository_storage_moves`, TOKEN, {
      destination_storage_name: 'second',
    });
    expect(move.status).toBe(201);
    let state = move.body.state as string;
    for (let i = 0; i < 300 && state !== 'finished' && state !== 'failed'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      state = (await call(base, 'GET', `/project_repository_storage_moves/${move.body.id}`, TOKEN)).body.state;
    }
    expect(state).toBe('finished');
    const moved = await call(base, 'GET', `/projects/${id}/repository/files/push-3.txt?ref=push-3`, TOKEN);
    expect(moved.status).toBe(200);

    // Both processes asked for one uncached archive at once generate it once (issue 27).
    git.close();
    mark = server.output().length;
    const archive = `/projects/${id}/repository/archive.tar.gz?sha=push-2`;
    const downloads = Array.from({ length: 4 }, () => download(base, archive, TOKEN));
    for (let i = 0; i < 500 && git.archives().length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    git.open();
    const bodies = await Promise.all(downloads);
    expect(bodies.map((b) => b.status)).toEqual([200, 200, 200, 200]);
    for (const b of bodies) expect(b.body.equals(bodies[0]?.body as Buffer)).toBe(true);
    expect(git.archives()).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(servedBy(server.output(), mark, `/api/v4${archive}`, 200).size).toBe(2);

    // SIGTERM to the primary stops both processes, then the database.
    const postmaster = Number(fs.readFileSync(path.join(storage, 'db', 'postmaster.pid'), 'utf8').split('\n')[0]);
    const exited = new Promise<number | null>((resolve) => server?.child.once('exit', (code) => resolve(code)));
    server.child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(() => process.kill(postmaster, 0)).toThrow();
    expect(fs.existsSync(path.join(storage, 'db.lock'))).toBe(false);
    expect(fs.existsSync(path.join(storage, 'db', 'postmaster.pid'))).toBe(false);
    server = undefined;
  });
});
