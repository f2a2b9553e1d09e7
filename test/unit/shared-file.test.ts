import fs from 'node:fs';
import fsPromises from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { text } from 'node:stream/consumers';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { openShared } from '../../src/lib/shared-file.js';

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-shared-file-'));
});
afterEach(() => vi.restoreAllMocks());
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Makes every removal of a claim slow, as it is on a loaded host (the removal waits its turn in
 * libuv's thread pool behind other file work): what a reader sees then depends on the order of
 * the producer's steps, not on timing.
 */
function slowClaimRemoval(ms: number): void {
  const rm = fsPromises.rm.bind(fsPromises);
  vi.spyOn(fsPromises, 'rm').mockImplementation(async (file, options) => {
    if (String(file).endsWith('.lock')) await sleep(ms);
    return rm(file, options);
  });
}

const namesOf = (base: string) => fs.readdirSync(dir).filter((name) => name.startsWith(`${base}.`));

// A reader that has seen the end of a generation may look at the directory at once (the next
// request, the age clean-up, a test): it must find the finished file alone, or nothing, never a
// claim left behind.
describe('a shared file, once its reader has seen the end', () => {
  it('is the finished file alone after a generation that succeeds', async () => {
    slowClaimRemoval(100);
    const file = path.join(dir, 'ok.txt');
    const reader = await openShared(file, {
      async produce(out) {
        out.write('first ');
        await sleep(20);
        out.end('last');
        await new Promise((resolve) => out.once('finish', resolve));
      },
    });
    expect(reader.origin).toBe('miss');
    expect(await text(reader.read())).toBe('first last');
    expect(namesOf('ok')).toEqual(['ok.txt']);
  });

  it('is nothing after a generation that fails', async () => {
    slowClaimRemoval(100);
    const file = path.join(dir, 'failed.txt');
    const reader = await openShared(file, {
      async produce(out) {
        out.write('first ');
        await sleep(20);
        throw new Error('the producer failed');
      },
    });
    await expect(text(reader.read())).rejects.toThrow(/generation of a shared file failed/);
    expect(namesOf('failed')).toEqual([]);
  });
});
