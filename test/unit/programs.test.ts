import { afterEach, describe, expect, it, vi } from 'vitest';
import { lacks, missingMessage, type Program } from '../support/programs.js';

const present: Program = { name: 'node', debianPackage: 'nodejs', probe: [process.execPath, '--version'] };
const absent: Program = { name: 'frobnicate', debianPackage: 'frob-tools', probe: ['/nonexistent/frobnicate'] };
const broken: Program = {
  name: 'broken',
  debianPackage: 'frob-tools',
  probe: [process.execPath, '-e', 'process.exit(3)'],
};

describe('tests that need a program the machine lacks', () => {
  const ci = process.env.CI;
  afterEach(() => {
    if (ci === undefined) delete process.env.CI;
    else process.env.CI = ci;
    vi.restoreAllMocks();
  });

  it('runs when every program answers', () => {
    delete process.env.CI;
    expect(missingMessage([present])).toBeUndefined();
    expect(lacks(present)).toBe(false);
  });

  it('skips with one line naming each missing program and the apt-get install that brings them', () => {
    delete process.env.CI;
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    expect(lacks(present, absent, broken)).toBe(true);
    expect(warn.mock.calls).toEqual([['skipped: frobnicate, broken not found (apt-get install frob-tools)']]);
  });

  it('fails instead under CI=true', () => {
    process.env.CI = 'true';
    expect(() => lacks(absent)).toThrow('CI=true: frobnicate not found (apt-get install frob-tools)');
  });
});
