/**
 * The changelog configuration file (lib/gitlab/changelog/config.rb), read from the repository:
 * date_format, template, categories, tag_regex and include_groups. Everything not given, or
 * given a false value, keeps GitLab's default.
 */
import { isAlias, isMap, isScalar, parseDocument, Scalar, visit } from 'yaml';
import { ChangelogError } from './errors.js';
import { DEFAULT_TAG_REGEX } from './tags.js';
import type { TemplateNode } from './template/ast.js';
import { parseTemplate } from './template/parser.js';

export const DEFAULT_CONFIG_FILE = '.gitlab/changelog_config.yml';
export const DEFAULT_DATE_FORMAT = '%Y-%m-%d';

/** GitLab's default template since 17.1: entries link to the commit and merge request web pages. */
export const DEFAULT_TEMPLATE = `{% if categories %}
{% each categories %}
### {{ title }} ({% if single_change %}1 change{% else %}{{ count }} changes{% end %})

{% each entries %}
- [{{ title }}]({{ commit.web_url }})\\
{% if author.credit %} by {{ author.reference }}{% end %}\\
{% if merge_request %} ([merge request]({{ merge_request.web_url }})){% end %}

{% end %}

{% end %}
{% else %}
No changes.
{% end %}
`;

export interface ChangelogConfig {
  dateFormat: string;
  template: TemplateNode[];
  /** Raw trailer value → displayed category title, in the file's order. */
  categories: Map<string, string>;
  tagRegex: string;
  /** Full paths of groups whose members are always credited. */
  includeGroups: string[];
}

let defaultTemplateNodes: TemplateNode[] | undefined;

export function defaultChangelogConfig(): ChangelogConfig {
  defaultTemplateNodes ??= parseTemplate(DEFAULT_TEMPLATE);
  return {
    dateFormat: DEFAULT_DATE_FORMAT,
    template: defaultTemplateNodes,
    categories: new Map(),
    tagRegex: DEFAULT_TAG_REGEX,
    includeGroups: [],
  };
}

// Plain scalars that Ruby's YAML.safe_load would turn into Symbol, Date or Time objects, which it refuses.
const RUBY_SYMBOL = /^:./;
const RUBY_DATE = /^\d{4}-\d{1,2}-\d{1,2}$/;
const RUBY_TIME = /^\d{4}-\d{1,2}-\d{1,2}(?:[Tt]|\s+)\d{1,2}:\d\d:\d\d(?:\.\d*)?(?:\s*(?:Z|[-+]\d{1,2}(?::?\d\d)?))?$/;
const SAFE_TAGS = new Set([
  'tag:yaml.org,2002:str',
  'tag:yaml.org,2002:int',
  'tag:yaml.org,2002:float',
  'tag:yaml.org,2002:bool',
  'tag:yaml.org,2002:null',
  'tag:yaml.org,2002:seq',
  'tag:yaml.org,2002:map',
  'tag:yaml.org,2002:binary',
]);

/** True when Ruby's safe loader would refuse the document (aliases, symbols, dates, other tags). */
function hasUnsafeNodes(doc: ReturnType<typeof parseDocument>): boolean {
  let unsafe = false;
  visit(doc, {
    Node(_key, node) {
      if (isAlias(node)) unsafe = true;
      else if (node.tag !== undefined && !SAFE_TAGS.has(node.tag)) unsafe = true;
      else if (
        isScalar(node) &&
        node.type === Scalar.PLAIN &&
        node.tag === undefined &&
        typeof node.source === 'string'
      ) {
        const text = node.source;
        if (RUBY_SYMBOL.test(text) || RUBY_DATE.test(text) || RUBY_TIME.test(text)) unsafe = true;
      }
      return unsafe ? visit.BREAK : undefined;
    },
  });
  return unsafe;
}

/** A YAML value as the text Ruby would use when it interpolates it. */
const asText = (value: unknown) => (typeof value === 'string' ? value : String(value));

/** Ruby's truthiness: only nil and false are false (GitLab's `if (x = hash['key'])`). */
const given = (value: unknown) => value !== null && value !== undefined && value !== false;

/**
 * Parses the configuration file's text (null or blank: all defaults). `path` names the file in
 * the YAML error, as GitLab words it.
 */
export function parseChangelogConfig(text: string | null, path: string): ChangelogConfig {
  const config = defaultChangelogConfig();
  if (text === null || text.trim() === '') return config;
  const invalid = () => new ChangelogError(`${path} does not contain valid YAML`);
  // Ruby's YAML is version 1.1 (`yes` is true); duplicate keys keep the last value, as there.
  const doc = parseDocument(text, { uniqueKeys: false, version: '1.1' });
  if (doc.errors.length > 0 || hasUnsafeNodes(doc)) throw invalid();
  const hash = doc.toJS() as Record<string, unknown> | null;
  if (hash === null || hash === undefined) return config; // `---` alone: an empty document
  if (!isMap(doc.contents)) throw invalid();

  if (given(hash.date_format)) config.dateFormat = asText(hash.date_format);
  if (given(hash.template)) config.template = parseTemplate(asText(hash.template));
  if (given(hash.categories)) {
    const categories = hash.categories;
    if (typeof categories !== 'object' || Array.isArray(categories) || categories === null) {
      throw new ChangelogError('The "categories" configuration key must be a Hash');
    }
    for (const [key, title] of Object.entries(categories)) config.categories.set(key, asText(title));
  }
  if (given(hash.tag_regex)) config.tagRegex = asText(hash.tag_regex);
  if (given(hash.include_groups)) {
    const groups = Array.isArray(hash.include_groups) ? hash.include_groups : [hash.include_groups];
    config.includeGroups = groups.filter(given).map(asText);
  }
  return config;
}

/** The displayed title of a raw trailer value. */
export function categoryTitle(config: ChangelogConfig, raw: string): string {
  return config.categories.get(raw) ?? raw;
}
