import { describe, expect, it } from 'vitest';
import { entriesForPaths, parseCodeOwners, patternToRegExp } from '../../src/services/code-owners.js';

const matches = (pattern: string, path: string) => patternToRegExp(pattern).test(`/${path}`);

describe('CODEOWNERS patterns', () => {
  it('matches paths as GitLab does (fnmatch with FNM_PATHNAME after normalising)', () => {
    expect(matches('*', 'any/thing.txt')).toBe(true);
    expect(matches('*.md', 'README.md')).toBe(true);
    expect(matches('*.md', 'docs/deep/guide.md')).toBe(true);
    expect(matches('*.md', 'README.mdx')).toBe(false);
    expect(matches('/README.md', 'README.md')).toBe(true);
    expect(matches('/README.md', 'docs/README.md')).toBe(false);
    expect(matches('docs/', 'docs/a/b.txt')).toBe(true);
    expect(matches('docs/', 'other/docs/a.txt')).toBe(true);
    expect(matches('/docs/', 'other/docs/x')).toBe(false);
    expect(matches('docs/*', 'docs/a.txt')).toBe(true);
    expect(matches('docs/*', 'docs/a/b.txt')).toBe(false);
    expect(matches('/lib/**/test.rb', 'lib/test.rb')).toBe(true);
    expect(matches('/lib/**/test.rb', 'lib/a/b/test.rb')).toBe(true);
    expect(matches('config', 'app/config')).toBe(true);
    expect(matches('config', 'app/config/x.yml')).toBe(false);
    expect(matches('a?c.txt', 'abc.txt')).toBe(true);
    expect(matches('a?c.txt', 'a/c.txt')).toBe(false);
    expect(matches('*.{js,ts}', 'src/a.ts')).toBe(true);
    expect(matches('[ab].txt', 'b.txt')).toBe(true);
    expect(matches('file\\ with\\ space', 'dir/file with space')).toBe(true);
    expect(matches('a.b', 'axb')).toBe(false);
    expect(matches('.gitlab/', '.gitlab/ci.yml')).toBe(true);
  });
});

describe('parseCodeOwners', () => {
  const file = parseCodeOwners(
    [
      '# comment',
      '*.rb @ruby-team @alice',
      '/docs/ @docs-lead docs@example.com',
      '',
      '[Backend][2] @backend-default',
      'app/',
      'app/models/ @models # trailing comment',
      '^[Optional docs]',
      '*.md @writer',
      '[Frontend]',
      '*.js @group/frontend',
    ].join('\n'),
  );

  it('reads sections, optional sections, approvals per section and default owners', () => {
    expect(
      file.entries.map((e) => [e.section, e.pattern, e.owners, e.emails, e.optional, e.approvalsRequired]),
    ).toEqual([
      ['codeowners', '*.rb', ['ruby-team', 'alice'], [], false, 1],
      ['codeowners', '/docs/', ['docs-lead'], ['docs@example.com'], false, 1],
      ['Backend', 'app/', ['backend-default'], [], false, 2],
      ['Backend', 'app/models/', ['models'], [], false, 2],
      ['Optional docs', '*.md', ['writer'], [], true, 0],
      ['Frontend', '*.js', ['group/frontend'], [], false, 1],
    ]);
  });

  it('takes the last matching entry of each section for each path', () => {
    const owners = entriesForPaths(file, ['app/models/user.rb', 'docs/intro.md']);
    expect(owners.map((e) => `${e.section}:${e.pattern}`)).toEqual([
      'codeowners:*.rb',
      'codeowners:/docs/',
      'Backend:app/models/',
      'Optional docs:*.md',
    ]);
    expect(entriesForPaths(file, ['unowned.txt'])).toEqual([]);
  });
});
