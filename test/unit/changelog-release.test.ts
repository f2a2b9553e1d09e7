import { describe, expect, it } from 'vitest';
import { changelogTitle, fullCommitTitle, selectChangelogCommits } from '../../src/changelog/commits.js';
import {
  DEFAULT_CONFIG_FILE,
  DEFAULT_DATE_FORMAT,
  DEFAULT_TEMPLATE,
  defaultChangelogConfig,
  parseChangelogConfig,
} from '../../src/changelog/config.js';
import { ChangelogError } from '../../src/changelog/errors.js';
import { insertRelease } from '../../src/changelog/generator.js';
import { type Release, type ReleaseEntry, releaseHeaderPattern, releaseMarkdown } from '../../src/changelog/release.js';
import { compareVersions, DEFAULT_TAG_REGEX, findPreviousTag } from '../../src/changelog/tags.js';
import { PARSE_ERROR_PREFIX, parseTemplate } from '../../src/changelog/template/parser.js';
import { type Commit, parseSignature } from '../../src/git/commit.js';
import { strftime } from '../../src/lib/strftime.js';
import { vectorsOf } from '../support/changelog-vectors.js';

const utc = (iso: string) => ({ epochMs: Date.parse(iso), offsetMinutes: 0 });

/** A Release from a vector's `release`-shaped input (author credit = contributor or always_credit). */
function releaseFrom(input: any): Release {
  const config = defaultChangelogConfig();
  for (const [raw, title] of Object.entries(input.config?.categories ?? {})) config.categories.set(raw, String(title));
  if (input.config?.template) config.template = parseTemplate(input.config.template);
  if (input.config?.date_format) config.dateFormat = input.config.date_format;
  const entries: ReleaseEntry[] = input.entries.map((e: any) => ({
    title: e.title,
    category: e.category,
    commit: e.commit,
    ...(e.author
      ? {
          author: {
            reference: e.author.reference,
            contributor: e.author.contributor,
            credit: Boolean(e.author.contributor || e.author.always_credit),
          },
        }
      : {}),
    ...(e.merge_request ? { merge_request: e.merge_request } : {}),
  }));
  return { version: input.version, date: utc(input.date), config, entries };
}

describe('release vectors', () => {
  for (const v of vectorsOf('release_markdown')) {
    it(v.name, () => {
      expect(releaseMarkdown(releaseFrom(v.input))).toBe(v.expected.markdown);
    });
  }
  for (const v of vectorsOf('release_header_pattern')) {
    it(v.name, () => {
      const pattern = releaseHeaderPattern(v.input.version);
      for (const text of v.expected.matches) expect(pattern.test(`intro\n${text}`), text).toBe(true);
      for (const text of v.expected.does_not_match) expect(pattern.test(`intro\n${text}`), text).toBe(false);
    });
  }
  for (const v of vectorsOf('format_date')) {
    it(v.name, () => {
      expect(strftime(utc(v.input.date), DEFAULT_DATE_FORMAT)).toBe(v.expected.formatted);
    });
  }
  for (const v of vectorsOf('changelog_insert')) {
    it(v.name, () => {
      expect(insertRelease(v.input.existing_file, releaseFrom(v.input.release))).toBe(v.expected.file);
    });
  }
  const [create] = vectorsOf('commit_changelog').filter((v) => v.expected.action === 'create');
  it(`${create?.name} (the file content; the commit itself is checked in test/api/changelog.test.ts)`, () => {
    expect(create?.input.existing_file).toBeNull();
    expect(insertRelease('', releaseFrom(create?.input.release))).toBe(create?.expected.file);
  });
});

describe('release sections', () => {
  const entry = (title: string, category: string): ReleaseEntry => ({
    title,
    category,
    commit: { reference: `g/p@${title}`, web_url: `https://x/${title}`, trailers: {} },
  });
  const release = (entries: ReleaseEntry[], categories: [string, string][] = []): Release => {
    const config = defaultChangelogConfig();
    for (const [raw, title] of categories) config.categories.set(raw, title);
    return { version: '1.0.0', date: utc('2021-01-05T00:00:00Z'), config, entries };
  };

  it('orders mapped titles as configured, then others by first appearance; merges raw values mapped alike', () => {
    const md = releaseMarkdown(
      release(
        [entry('A', 'zeta'), entry('B', 'fix'), entry('C', 'alpha'), entry('D', 'bug'), entry('E', 'zeta')],
        [
          ['feature', 'Features'],
          ['bug', 'Bug fixes'],
          ['fix', 'Bug fixes'],
        ],
      ),
    );
    expect(md).toBe(
      '## 1.0.0 (2021-01-05)\n\n' +
        '### Bug fixes (2 changes)\n\n- [B](https://x/B)\n- [D](https://x/D)\n\n' +
        '### zeta (2 changes)\n\n- [A](https://x/A)\n- [E](https://x/E)\n\n' +
        '### alpha (1 change)\n\n- [C](https://x/C)\n\n',
    );
  });

  it('the default template is GitLab 17.1+ (web_url links), 381 characters', () => {
    expect(DEFAULT_TEMPLATE.length).toBe(381);
    expect(DEFAULT_TEMPLATE).toContain('{{ commit.web_url }}');
    expect(DEFAULT_TEMPLATE).toContain('{{ merge_request.web_url }}');
  });

  it('formats the date in its own offset with the configured format', () => {
    const r = release([]);
    r.config.dateFormat = '%B %-d, %Y %H:%M %z';
    r.date = { epochMs: Date.parse('2021-01-05T01:30:00Z'), offsetMinutes: -120 };
    expect(releaseMarkdown(r)).toBe('## 1.0.0 (January 4, 2021 23:30 -0200)\n\nNo changes.\n\n');
  });

  it('a section goes above a pre-release of the same version and the last of duplicate headers counts', () => {
    const file = '## 1.0.0-rc1 (x)\n\nrc\n';
    expect(insertRelease(file, release([]))).toBe('## 1.0.0 (2021-01-05)\n\nNo changes.\n\n## 1.0.0-rc1 (x)\n\nrc\n');
    const dup = '## 0.1.0\n\na\n\n## 2.0.0\n\nb\n\n## 0.1.0\n\nc\n';
    expect(insertRelease(dup, release([]))).toBe(
      '## 0.1.0\n\na\n\n## 2.0.0\n\nb\n\n## 1.0.0 (2021-01-05)\n\nNo changes.\n\n## 0.1.0\n\nc\n',
    );
  });

  it('`## v1.0.0` and `### 1.0.0` are not section headers: the section is appended', () => {
    expect(insertRelease('## v0.1.0\n### 0.2.0\n', release([]))).toBe(
      '## v0.1.0\n### 0.2.0\n## 1.0.0 (2021-01-05)\n\nNo changes.\n',
    );
  });

  it('the lowest version is appended after a blank line, also to a file without a final newline', () => {
    expect(insertRelease('## 2.0.0\n\nx', release([]))).toBe('## 2.0.0\n\nx\n## 1.0.0 (2021-01-05)\n\nNo changes.\n');
    expect(insertRelease('## 2.0.0\n\nx\n', release([]))).toBe(
      '## 2.0.0\n\nx\n\n## 1.0.0 (2021-01-05)\n\nNo changes.\n',
    );
  });
});

describe('changelog configuration', () => {
  for (const v of vectorsOf('config').filter(
    (v) => 'config_yaml' in v.input || 'template' in (v.input.config_hash ?? {}),
  )) {
    it(v.name, () => {
      const path = v.input.config_file ?? DEFAULT_CONFIG_FILE;
      const yaml = v.input.config_yaml ?? `template: ${JSON.stringify(v.input.config_hash.template)}\n`;
      if (v.expected.error) {
        expect(() => parseChangelogConfig(yaml, path)).toThrow(new ChangelogError(v.expected.error));
      } else if (v.expected.error_prefix) {
        expect(() => parseChangelogConfig(yaml, path)).toThrow(v.expected.error_prefix);
        expect(v.expected.error_prefix).toBe(PARSE_ERROR_PREFIX);
      } else if (v.expected.defaults) {
        expect(parseChangelogConfig(yaml, path)).toEqual(defaultChangelogConfig());
      } else {
        expect(parseChangelogConfig(yaml, path).dateFormat).toBe(v.expected.hash.date_format);
      }
    });
  }

  it('reads every key; false or absent values keep the defaults', () => {
    const config = parseChangelogConfig(
      [
        "date_format: '%d.%m.%Y'",
        'template: |',
        '  {{ categories.0.title }}',
        'categories:',
        '  feature: Features',
        '  fix: Fixes',
        "tag_regex: '^release-(?P<major>\\d+)\\.(?P<minor>\\d+)\\.(?P<patch>\\d+)$'",
        'include_groups: team',
      ].join('\n'),
      'c.yml',
    );
    expect(config.dateFormat).toBe('%d.%m.%Y');
    expect([...config.categories]).toEqual([
      ['feature', 'Features'],
      ['fix', 'Fixes'],
    ]);
    expect(config.tagRegex).toBe('^release-(?P<major>\\d+)\\.(?P<minor>\\d+)\\.(?P<patch>\\d+)$');
    expect(config.includeGroups).toEqual(['team']);
    expect(parseChangelogConfig('include_groups: [a, b/c]', 'c.yml').includeGroups).toEqual(['a', 'b/c']);
    const falsy = parseChangelogConfig('date_format: false\ntemplate: ~\ncategories: false', 'c.yml');
    expect(falsy).toEqual(defaultChangelogConfig());
    expect(parseChangelogConfig('---\n', 'c.yml')).toEqual(defaultChangelogConfig());
  });

  it('categories must be a mapping', () => {
    expect(() => parseChangelogConfig('categories: [a, b]', 'c.yml')).toThrow(
      new ChangelogError('The "categories" configuration key must be a Hash'),
    );
  });

  it.each([
    'date_format: [',
    'a: b\n  c: d\n: e',
    'released: 2021-01-05',
    'at: 2021-01-05 10:00:00 +01:00',
    'a: &x 1\nb: *x',
    'a: !ruby/object:Foo {}',
    '- a list',
    'just a string',
  ])('refuses what Ruby safe_load refuses (or what is no mapping): %j', (yaml) => {
    expect(() => parseChangelogConfig(yaml, 'c.yml')).toThrow(new ChangelogError('c.yml does not contain valid YAML'));
  });

  it('quoted symbols and dates are plain strings', () => {
    expect(parseChangelogConfig("date_format: ':%Y'", 'c.yml').dateFormat).toBe(':%Y');
  });
});

describe('previous tag', () => {
  for (const v of vectorsOf('tag_finder')) {
    it(v.name, () => {
      const regex = v.input.tag_regex === 'default' ? DEFAULT_TAG_REGEX : v.input.tag_regex;
      const tags = v.input.tags.map((name: string) => ({ name }));
      const cases = v.input.cases ?? [{ version: v.input.version, ...v.expected }];
      if (v.expected.all_cases_match !== undefined) expect(v.expected.all_cases_match).toBe(true);
      for (const c of cases) {
        if (c.error) {
          expect(() => findPreviousTag(tags, c.version, regex), c.version).toThrow(new ChangelogError(c.error));
        } else {
          expect(findPreviousTag(tags, c.version, regex)?.name ?? null, c.version).toBe(c.tag);
        }
      }
    });
  }

  it('an invalid regex is a clear error, even with no tags', () => {
    expect(() => findPreviousTag([], '1.0.0', '(?P<major>\\d+')).toThrow(
      /^The regular expression to use for finding the previous tag for a version is invalid: .*missing closing \)/,
    );
  });

  it('tags missing a major, minor or patch group are ignored; the later of equal keys wins', () => {
    const tags = [{ name: 'r-1' }, { name: 'v1.0.0' }, { name: '1.0.0' }];
    expect(findPreviousTag(tags, '2.0.0', '^r-(?P<major>\\d+)$')).toBeNull();
    expect(findPreviousTag(tags, '2.0.0')?.name).toBe('1.0.0');
  });

  it('version_sorter order', () => {
    const sorted = [
      '1.0.0',
      '1.0.0.1',
      '1.0.0-rc1',
      '0.10.0',
      '0.9.0',
      '16.8.0+ee.0',
      '16.8.0',
      '1.0.0-rc10',
      '1.0.0-rc2',
    ];
    sorted.sort(compareVersions);
    expect(sorted).toEqual([
      '0.9.0',
      '0.10.0',
      '1.0.0-rc1',
      '1.0.0-rc2',
      '1.0.0-rc10',
      '1.0.0',
      '1.0.0.1',
      '16.8.0+ee.0',
      '16.8.0',
    ]);
    expect(compareVersions('1.99999999999', '1.2')).toBe(-1); // past 32 bits a number is a string
    expect(compareVersions('abc', 'abd')).toBe(-1);
    expect(compareVersions('...', '..')).toBe(1); // no components at all: plain strcmp
  });
});

const sig = parseSignature('A <a@example.com> 1600000000 +0000');
const commit = (id: string, message: string): Commit => ({
  id,
  tree: '',
  parentIds: [],
  author: sig,
  committer: sig,
  message,
});
const collect = async (commits: Commit[], trailer: string) => {
  const out: string[] = [];
  for await (const c of selectChangelogCommits(commits, trailer)) out.push(c.commit.id);
  return out;
};

describe('commit selection', () => {
  for (const v of vectorsOf('commit_filter').filter((v) => v.input.commits_newest_first)) {
    it(v.name, async () => {
      const commits = v.input.commits_newest_first.map((c: any) => commit(c.id, c.message));
      const ids = await collect(commits, v.input.trailer);
      expect(ids).toEqual(v.expected.commit_ids);
      const titles = commits.filter((c: Commit) => ids.includes(c.id)).map((c: Commit) => fullCommitTitle(c.message));
      expect([...titles].sort()).toEqual(v.expected.titles_included);
      for (const t of v.expected.titles_excluded) expect(titles).not.toContain(t);
    });
  }

  const A = 'a'.repeat(40);
  const B = 'b'.repeat(40);
  const C = 'c'.repeat(40);
  it('a revert of a revert restores the original; the middle revert is skipped unread', async () => {
    const ids = await collect(
      [
        commit(C, `Revert "Revert"\n\nThis reverts commit ${B}.\n\nChangelog: fixed`),
        commit(B, `Revert "Add"\n\nThis reverts commit ${A}.`),
        commit(A, 'Add\n\nChangelog: added'),
      ],
      'Changelog',
    );
    expect(ids).toEqual([C, A]);
  });

  it('the trailer name is case-sensitive; a revert in the title line does not count', async () => {
    expect(await collect([commit(A, 'x\n\nchangelog: added')], 'Changelog')).toEqual([]);
    expect(
      await collect([commit(B, `This reverts commit ${A}`), commit(A, 'Add\n\nChangelog: added')], 'Changelog'),
    ).toEqual([A]);
  });

  it('a revert line anywhere in a long-titled message counts; case is ignored', async () => {
    const long = `This reverts commit ${A} ${'x'.repeat(60)}`;
    expect(await collect([commit(B, long), commit(A, 'Add\n\nChangelog: added')], 'Changelog')).toEqual([]);
    expect(
      await collect(
        [commit(B, `Revert\n\nthis REVERTS commit ${A}`), commit(A, 'Add\n\nChangelog: added')],
        'Changelog',
      ),
    ).toEqual([]);
  });

  it('the last of repeated trailers wins', async () => {
    const found = [];
    for await (const c of selectChangelogCommits(
      [commit(A, 'Add\n\nChangelog: added\nChangelog: fixed')],
      'Changelog',
    )) {
      found.push(c);
    }
    const [only] = found;
    expect(only?.category).toBe('fixed');
    expect(only?.trailers).toEqual({ Changelog: 'fixed' });
  });

  it('titles: first line, `No commit message`, and GitLab truncation past 100 characters', () => {
    expect(changelogTitle('Title\r\nbody')).toBe('Title');
    expect(changelogTitle('  \n ')).toBe('No commit message');
    const words = `${'word '.repeat(30)}`.trim();
    expect(changelogTitle(words)).toBe(`${words.slice(0, 74)}...`);
    expect(changelogTitle('y'.repeat(120))).toBe(`${'y'.repeat(78)}...`);
    expect(changelogTitle('z'.repeat(99))).toBe('z'.repeat(99));
  });
});
