import { describe, expect, it } from 'vitest';
import { buildArgv } from '../../src/git/command.js';
import { InvalidArgumentError } from '../../src/git/errors.js';
import {
  isValidBranchName,
  isValidRefFormat,
  isValidRepoPath,
  isValidRevision,
  isValidStorageName,
} from '../../src/git/validate.js';

describe('branch names (git check-ref-format + GitLab rules)', () => {
  it('accepts ordinary names', () => {
    for (const name of ['main', 'feature/x', 'release-1.0', 'ünïcödé', 'a.b', 'v1.0.0', 'fix_123']) {
      expect(isValidBranchName(name), name).toBe(true);
    }
  });
  it('refuses what git or GitLab refuse', () => {
    const bad = [
      '',
      'HEAD',
      '-x',
      '--output=/tmp/pwn',
      'refs/heads/x',
      'a..b',
      'a.lock',
      'a/',
      'a.',
      '.a',
      'a/.b',
      'a//b',
      'a@{b',
      '@',
      'a b',
      'a~b',
      'a^b',
      'a:b',
      'a?b',
      'a*b',
      'a[b',
      'a\\b',
      'a\u0001b',
      'a\u007fb',
      '0123456789abcdef0123456789abcdef01234567',
      'x'.repeat(2000),
    ];
    for (const name of bad) expect(isValidBranchName(name), JSON.stringify(name)).toBe(false);
  });
  it('applies the component rules to full ref names', () => {
    expect(isValidRefFormat('refs/heads/main')).toBe(true);
    expect(isValidRefFormat('refs/heads/../../config')).toBe(false);
  });
});

describe('revisions', () => {
  it('accepts names, shas and relative revisions', () => {
    for (const rev of ['main', 'v1.0.0', 'a1b2c3d', 'main~1', 'main^', 'HEAD', 'feature/x']) {
      expect(isValidRevision(rev), rev).toBe(true);
    }
  });
  it('refuses options, whitespace, ranges and path forms', () => {
    for (const rev of [
      '-foo',
      '--all',
      '--glob=*',
      'foo bar',
      'foo\nbar',
      'foo\tbar',
      'foo\0bar',
      'foo\\bar',
      'main:secret.txt',
      ':path',
      'main..other',
      'main...other',
      '',
    ]) {
      expect(isValidRevision(rev), JSON.stringify(rev)).toBe(false);
    }
  });
});

describe('repository paths', () => {
  it('accepts relative paths, dot-prefixed names and unicode', () => {
    for (const p of [
      'README.md',
      'docs/guide/intro.md',
      '.test/foo',
      '..test/foo',
      'dir/..foo.rb',
      'dir/.foo.rb',
      'データ/説明.txt',
    ]) {
      expect(isValidRepoPath(p), p).toBe(true);
    }
  });
  it('refuses traversal, absolute paths, NUL and newlines', () => {
    for (const p of [
      '.',
      '..',
      '../foo',
      '..\\foo',
      'foo/../../bar',
      'foo\\..\\bar',
      'foo/..',
      '/etc/passwd',
      'test\n/etc/passwd',
      'foo\0.txt',
      '',
    ]) {
      expect(isValidRepoPath(p), JSON.stringify(p)).toBe(false);
    }
  });
});

describe('storage names', () => {
  it('accepts configured-style names only', () => {
    expect(isValidStorageName('default')).toBe(true);
    expect(isValidStorageName('ssd-2')).toBe(true);
    for (const n of ['', ' ', '../default', 'default/..', 'a/b', '.hidden'])
      expect(isValidStorageName(n), n).toBe(false);
  });
});

describe('the git command builder', () => {
  it('keeps user values after --end-of-options and paths after --', () => {
    expect(
      buildArgv({
        gitDir: '/r.git',
        subcommand: 'log',
        flags: ['--format=%H', ['-n', '5']],
        args: ['main'],
        endOfOptions: true,
        paths: ['a b'],
      }),
    ).toEqual(['--git-dir=/r.git', 'log', '--format=%H', '-n', '5', '--end-of-options', 'main', '--', 'a b']);
  });
  it('refuses a user value that looks like an option', () => {
    expect(() => buildArgv({ subcommand: 'log', args: ['--output=/tmp/pwn'] })).toThrow(InvalidArgumentError);
    expect(() => buildArgv({ subcommand: 'log', flags: [['-p', '-x']] })).toThrow(InvalidArgumentError);
    expect(() => buildArgv({ subcommand: 'log', flags: ['not-a-flag'] })).toThrow(InvalidArgumentError);
    expect(() => buildArgv({ subcommand: 'log', paths: ['a\0b'] })).toThrow(InvalidArgumentError);
  });
  it('puts the action of a subcommand right after it, and takes only a plain word', () => {
    expect(buildArgv({ subcommand: 'commit-graph', action: 'write', flags: ['--reachable'] })).toEqual([
      'commit-graph',
      'write',
      '--reachable',
    ]);
    for (const action of ['--help', 'write --x', '', 'Write'])
      expect(() => buildArgv({ subcommand: 'commit-graph', action }), action).toThrow(InvalidArgumentError);
  });
});
