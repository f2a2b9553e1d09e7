import { execFile } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { gitEnvironment } from '../../src/git/command.js';
import { type Launched, launch } from '../../src/git/launcher.js';

const env = gitEnvironment();

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Waits for `close` and answers [code, signal]. */
async function closed(child: Launched): Promise<[number | null, string | null]> {
  const [code, signal] = await once(child, 'close');
  return [code as number | null, signal as string | null];
}

const parentOf = async (pid: number) =>
  Number((await fs.readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]?.split(' ')[1]);

describe('the process launcher', () => {
  it('starts children from the spawner, never from the server process', async () => {
    const child = launch(['sh', '-c', 'echo started; exec sleep 30'], env, { input: '' });
    await once(child.stdout, 'data');
    expect(child.pid).toBeGreaterThan(0);
    const parent = await parentOf(child.pid as number);
    expect(parent).not.toBe(process.pid);
    // The parent is the spawner, itself a child of this process.
    expect(await parentOf(parent)).toBe(process.pid);
    child.kill();
    expect(await closed(child)).toEqual([null, 'SIGKILL']);
  });

  it('delivers every byte of many children running at once', async () => {
    const expected = Buffer.from(`${Array.from({ length: 100_000 }, (_, i) => i + 1).join('\n')}\n`);
    const runs = Array.from({ length: 24 }, () => {
      const child = launch(['seq', '1', '100000'], env, { input: '' });
      return Promise.all([collect(child.stdout), closed(child)]);
    });
    for (const [out, exit] of await Promise.all(runs)) {
      expect(exit).toEqual([0, null]);
      expect(out.equals(expected)).toBe(true);
    }
  });

  it('passes input inline or through the pipe, whatever its size', async () => {
    for (const size of [1, 65_536, 65_537, 3_000_000]) {
      const input = Buffer.alloc(size, 'x');
      input.write('head', 0);
      const child = launch(['cat'], env, { input });
      const [out, exit] = await Promise.all([collect(child.stdout), closed(child)]);
      expect(exit).toEqual([0, null]);
      expect(out.equals(input)).toBe(true);
    }
    const piped = launch(['wc', '-c'], env);
    piped.stdin.end(Buffer.alloc(5_000_000));
    expect((await collect(piped.stdout)).toString().trim()).toBe('5000000');
  });

  it('reports stderr and the exit code', async () => {
    const child = launch(['sh', '-c', 'echo oops >&2; exit 3'], env, { input: '' });
    const [err, exit] = await Promise.all([collect(child.stderr), closed(child), collect(child.stdout)]);
    expect(err.toString()).toBe('oops\n');
    expect(exit).toEqual([3, null]);
  });

  it('stops a child whose reader went away', async () => {
    const child = launch(['yes'], env, { input: '' });
    await once(child.stdout, 'data');
    child.stdout.destroy();
    // `yes` never ends on its own: it stops only because its pipe closed (EPIPE).
    const [code, signal] = await closed(child);
    expect(code !== 0 || signal !== null).toBe(true);
  });

  it('keeps a process with nothing else to do alive until its git command ends (a CLI)', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-launcher-'));
    try {
      const script = path.join(dir, 'cli.mts');
      const command = new URL('../../src/git/command.ts', import.meta.url).pathname;
      // A stream without a timeout: no timer of its own keeps the process running.
      await fs.writeFile(
        script,
        [
          `import { streamGit } from ${JSON.stringify(command)};`,
          "const git = streamGit({ subcommand: 'version' });",
          'for await (const chunk of git.stdout) process.stdout.write(chunk);',
          'await git.done;',
        ].join('\n'),
      );
      const tsx = new URL('../../node_modules/.bin/tsx', import.meta.url).pathname;
      const { stdout } = await promisify(execFile)(tsx, [script], { env: { PATH: process.env.PATH } });
      expect(stdout).toMatch(/^git version \d+\.\d+/);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('ends the children of a spawner that died, and starts a new spawner for the next', async () => {
    const child = launch(['sh', '-c', 'echo started; exec sleep 30'], env, { input: '' });
    await once(child.stdout, 'data');
    const spawnerPid = await parentOf(child.pid as number);
    process.kill(spawnerPid, 'SIGKILL');
    expect(await closed(child)).toEqual([null, 'SIGKILL']);
    // The orphaned child was stopped too, not left running.
    // A zombie counts as gone: this machine's init may never reap it.
    const state = () =>
      fs.readFile(`/proc/${child.pid}/stat`, 'utf8').then(
        (stat) => (stat.split(') ')[1]?.startsWith('Z') ? 'gone' : 'running'),
        () => 'gone',
      );
    await expect.poll(state).toBe('gone');
    const next = launch(['echo', 'again'], env, { input: '' });
    const [out, exit] = await Promise.all([collect(next.stdout), closed(next)]);
    expect(out.toString()).toBe('again\n');
    expect(exit).toEqual([0, null]);
  });

  it('lets a child write its stdout straight into a socket, which stays usable afterwards', async () => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    const [ours] = (await once(server, 'connection')) as [net.Socket];
    const received: Buffer[] = [];
    client.on('data', (chunk: Buffer) => received.push(chunk));
    try {
      const child = launch(['sh', '-c', 'head -c 3000000 /dev/zero; printf end'], env, { input: '', output: ours });
      expect(await closed(child)).toEqual([0, null]);
      expect((await collect(child.stdout)).length).toBe(0);
      // The socket is still this process's: what it writes next follows the child's bytes.
      ours.end('|after');
      await once(client, 'end');
      const all = Buffer.concat(received);
      expect(all.length).toBe(3_000_000 + 'end|after'.length);
      expect(all.subarray(3_000_000).toString()).toBe('end|after');
      expect(all.subarray(0, 3_000_000).every((byte) => byte === 0)).toBe(true);
    } finally {
      client.destroy();
      server.close();
    }
  });

  it('refuses a closed output socket with EPIPE', async () => {
    const closedSocket = new net.Socket();
    closedSocket.destroy();
    const child = launch(['echo', 'lost'], env, { input: '', output: closedSocket });
    const [error] = await once(child, 'error');
    expect((error as NodeJS.ErrnoException).code).toBe('EPIPE');
  });

  it('answers a start failure as an error event with its code', async () => {
    const child = launch(['/nonexistent/depot-no-such-binary'], env, { input: '' });
    const [error] = await once(child, 'error');
    expect((error as NodeJS.ErrnoException).code).toBe('ENOENT');
  });
});
