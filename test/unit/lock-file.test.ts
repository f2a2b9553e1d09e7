import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { acquireLock, LockedError } from '../../src/lib/lock-file.js';

describe('the embedded database lock', () => {
  it('refuses a second holder while the first lives, and frees on release', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-lock-'));
    const lock = path.join(dir, 'db.lock');
    const release = acquireLock(lock, 'the test database');
    // A live process other than us holds it: pretend the holder is our parent.
    fs.writeFileSync(lock, `${process.ppid}\n`);
    expect(() => acquireLock(lock, 'the test database')).toThrow(LockedError);
    expect(() => acquireLock(lock, 'the test database')).toThrow(/already in use by process/);
    fs.writeFileSync(lock, `${process.pid}\n`);
    release();
    expect(fs.existsSync(lock)).toBe(false);
    fs.rmSync(dir, { recursive: true });
  });

  it('takes over a lock left by a process that is gone', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-lock-'));
    const lock = path.join(dir, 'db.lock');
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
    fs.writeFileSync(lock, `${dead}\n`);
    const release = acquireLock(lock, 'the test database');
    expect(fs.readFileSync(lock, 'utf8').trim()).toBe(String(process.pid));
    release();
    fs.rmSync(dir, { recursive: true });
  });
});
