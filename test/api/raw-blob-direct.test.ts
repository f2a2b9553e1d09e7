import { execFile } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeProject, makeUser } from '../support/factories.js';
import { commitTree, gitIn } from '../support/git-fixtures.js';

// Raw blobs over 1 MiB are written by git into the client's connection itself (src/http/direct.ts).

let app: TestApp;
let owner: User;
let project: Project;
let gitDir: string;
const exec = promisify(execFile);

/** 3 MiB that sniff as PNG; 32 MiB of binary data, more than loopback socket buffers hold. */
const png = Buffer.alloc(3 * 1024 * 1024, 1);
Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex').copy(png);
const big = Buffer.alloc(32 * 1024 * 1024, 0);
for (let i = 0; i < big.length; i += 4093) big[i] = i % 251;
const ids: Record<string, string> = {};

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
  project = await makeProject(app, owner, { path: 'raw-direct', visibility: 'public' });
  gitDir = app.deps.storages.repositoryPath(project.repository_storage, project.id);
  await commitTree(gitDir, 'main', { 'image.png': { content: png }, 'data.bin': { content: big } });
  for (const name of ['image.png', 'data.bin'])
    ids[name] = (await gitIn(gitDir, ['rev-parse', `main:${name}`])).toString().trim();
});
afterAll(async () => {
  await app?.close();
});

const rawPath = (name: string) => `/api/v4/projects/${project.id}/repository/blobs/${ids[name]}/raw`;

/** Reads HTTP/1.1 responses (Content-Length bodies) from a socket until `count` are complete. */
async function readResponses(socket: net.Socket, count: number) {
  let chunks: Buffer[] = [];
  let size = 0;
  let need = 0; // bytes the response being read needs in all, once its head is known
  const responses: { head: string; body: Buffer }[] = [];
  for await (const chunk of socket) {
    chunks.push(chunk as Buffer);
    size += (chunk as Buffer).length;
    while (size > 0 && size >= need) {
      const buffered = Buffer.concat(chunks);
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) break;
      const head = buffered.subarray(0, end).toString('latin1');
      need = end + 4 + Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
      chunks = [buffered];
      if (size < need) break;
      responses.push({ head, body: buffered.subarray(end + 4, need) });
      chunks = [buffered.subarray(need)];
      size -= need;
      need = 0;
    }
    if (responses.length === count) break;
  }
  return responses;
}

/** The pids of running `git cat-file blob <oid>` processes. */
async function catFilePids(oid: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const argv = await fs.readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    const stat = await fs.readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    if (argv.includes('\0cat-file\0') && argv.includes(`\0blob\0${oid}`) && !stat.split(') ')[1]?.startsWith('Z'))
      pids.push(Number(entry));
  }
  return pids;
}

/** The inodes of this machine's TCP sockets (the tenth column of /proc/net/tcp and tcp6). */
async function tcpInodes(): Promise<string[]> {
  const tables = await Promise.all(['tcp', 'tcp6'].map((t) => fs.readFile(`/proc/net/${t}`, 'utf8').catch(() => '')));
  return tables.flatMap((table) =>
    table
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(/\s+/)[9])
      .filter((inode): inode is string => !!inode),
  );
}

describe('large raw blobs', () => {
  it('arrive byte for byte with GitLab’s raw headers, through curl and fetch', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-raw-'));
    try {
      for (const [name, bytes, type, disposition] of [
        ['image.png', png, 'image/png', 'inline'],
        ['data.bin', big, 'application/octet-stream', 'attachment'],
      ] as const) {
        const out = path.join(dir, name);
        const { stdout } = await exec('curl', ['-sS', '-D', '-', '-o', out, new URL(rawPath(name), app.baseUrl).href]);
        expect(stdout).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
        expect(stdout).toContain(`\r\nContent-Length: ${bytes.length}\r\n`);
        expect(stdout).toContain(`\r\nContent-Type: ${type}\r\n`);
        expect(stdout).toContain(`\r\nContent-Disposition: ${disposition}\r\n`);
        expect(stdout).toContain('\r\nCache-Control: max-age=0, private, must-revalidate, no-store, no-cache\r\n');
        expect((await fs.readFile(out)).equals(bytes)).toBe(true);
        const res = await fetch(new URL(rawPath(name), app.baseUrl));
        expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
      }
      const file = await fetch(
        new URL(`/api/v4/projects/${project.id}/repository/files/data.bin/raw?ref=main`, app.baseUrl),
      );
      expect(file.headers.get('content-disposition')).toBe(
        `attachment; filename="data.bin"; filename*=UTF-8''data.bin`,
      );
      expect(Buffer.from(await file.arrayBuffer()).equals(big)).toBe(true);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('keep the connection for the requests that follow, pipelined ones included', async () => {
    const socket = net.connect(new URL(app.baseUrl).port as unknown as number, '127.0.0.1');
    await once(socket, 'connect');
    const get = (target: string) => `GET ${target} HTTP/1.1\r\nHost: depot\r\n\r\n`;
    socket.write(get(rawPath('image.png')) + get('/-/liveness') + get(rawPath('image.png')));
    const [first, liveness, last] = await readResponses(socket, 3);
    socket.destroy();
    expect(first?.head).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(first?.body.equals(png)).toBe(true);
    expect(liveness?.head).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(JSON.parse(liveness?.body.toString() ?? '')).toEqual({ status: 'ok' });
    expect(last?.body.equals(png)).toBe(true);

    // curl reuses its connection after a raw blob, for an answer larger than the socket buffers.
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-raw-'));
    try {
      const json = `/api/v4/projects/${project.id}/repository/blobs/${ids['data.bin']}`;
      const urls = [rawPath('data.bin'), json, rawPath('image.png')].map((u) => new URL(u, app.baseUrl).href);
      const outs = urls.map((_, i) => path.join(dir, `out${i}`));
      const { stdout } = await exec('curl', [
        '-sS',
        '-w',
        '%{http_code} %{num_connects}\n',
        ...urls.flatMap((url, i) => [url, '-o', outs[i] as string]),
      ]);
      expect(stdout).toBe('200 1\n200 0\n200 0\n');
      expect((await fs.readFile(outs[0] as string)).equals(big)).toBe(true);
      const content = JSON.parse(await fs.readFile(outs[1] as string, 'utf8')).content;
      expect(Buffer.from(content, 'base64').equals(big)).toBe(true);
      expect((await fs.readFile(outs[2] as string)).equals(png)).toBe(true);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('are written by git into the client’s socket, and git stops when the client goes away', async () => {
    const socket = net.connect(new URL(app.baseUrl).port as unknown as number, '127.0.0.1');
    await once(socket, 'connect');
    socket.write(`GET ${rawPath('data.bin')} HTTP/1.1\r\nHost: depot\r\n\r\n`);
    await once(socket, 'data');
    // The client reads no further: git, blocked on the full socket, is still running.
    socket.pause();
    await expect.poll(() => catFilePids(ids['data.bin'] as string), { timeout: 5000 }).toHaveLength(1);
    const [pid] = await catFilePids(ids['data.bin'] as string);
    // git's stdout is a TCP connection (a pipe from the server would be a Unix socket pair).
    const inode = /^socket:\[(\d+)\]$/.exec(await fs.readlink(`/proc/${pid}/fd/1`))?.[1];
    expect(inode).toBeDefined();
    expect(await tcpInodes()).toContain(inode);
    // It is the server's connection, whose flags git shares: it must still be non-blocking.
    const flags = /^flags:\s+([0-7]+)$/m.exec(await fs.readFile(`/proc/${pid}/fdinfo/1`, 'utf8'))?.[1];
    expect(Number.parseInt(flags ?? '0', 8) & 0o4000).toBe(0o4000);
    socket.destroy();
    await expect.poll(() => catFilePids(ids['data.bin'] as string), { timeout: 5000 }).toEqual([]);
    const after = await fetch(new URL(rawPath('image.png'), app.baseUrl));
    expect(Buffer.from(await after.arrayBuffer()).equals(png)).toBe(true);
  });

  it('answer HEAD with the headers and no body', async () => {
    const res = await fetch(new URL(rawPath('data.bin'), app.baseUrl), { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).toBe(String(big.length));
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    expect((await res.arrayBuffer()).byteLength).toBe(0);
  });
});
