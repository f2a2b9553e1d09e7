/**
 * One release section of a changelog (lib/gitlab/changelog/release.rb): entries grouped into
 * categories, rendered with the configured template under a `## <version> (<date>)` header.
 */
import { strftime, type ZonedTime } from '../lib/strftime.js';
import { type ChangelogConfig, categoryTitle } from './config.js';
import { renderTemplate, type TemplateValue } from './template/evaluator.js';

export interface ReleaseEntry {
  title: string;
  /** The raw trailer value. */
  category: string;
  commit: { reference: string; web_url: string; trailers: Record<string, string> };
  /** Absent when no Depot user has the commit author's e-mail. */
  author?: { reference: string; contributor: boolean; credit: boolean };
  /** Absent when no merge request introduced the commit. */
  merge_request?: { reference: string; web_url: string };
}

export interface Release {
  /** As requested; one leading `v` is dropped in the header. */
  version: string;
  date: ZonedTime;
  config: ChangelogConfig;
  /** In commit-walk order: newest first. */
  entries: ReleaseEntry[];
}

/** The version as it appears in the header and is compared: one leading `v` removed. */
export function releaseVersion(version: string): string {
  return version.startsWith('v') ? version.slice(1) : version;
}

/**
 * Categories in GitLab's order: the configured titles in the order the mapping lists them,
 * then other titles by first appearance; categories without entries are left out.
 */
export function templateData(release: Release): { categories: TemplateValue[] } {
  const grouped = new Map<string, ReleaseEntry[]>();
  for (const title of release.config.categories.values()) if (!grouped.has(title)) grouped.set(title, []);
  for (const entry of release.entries) {
    const title = categoryTitle(release.config, entry.category);
    const list = grouped.get(title);
    if (list) list.push(entry);
    else grouped.set(title, [entry]);
  }
  const categories: TemplateValue[] = [];
  for (const [title, entries] of grouped) {
    if (entries.length === 0) continue;
    categories.push({
      title,
      count: entries.length,
      single_change: entries.length === 1,
      entries: entries.map(({ category: _category, ...entry }) => entry as unknown as TemplateValue),
    });
  }
  return { categories };
}

// Ruby's String#strip: whitespace and NUL at both ends.
const strip = (text: string) => text.replace(/^[\0\t\n\v\f\r ]+/, '').replace(/[\0\t\n\v\f\r ]+$/, '');

/** The section as GitLab builds it: header, blank line, stripped template output, blank line. */
export function releaseMarkdown(release: Release): string {
  const notes = strip(renderTemplate(release.config.template, templateData(release)));
  const date = strftime(release.date, release.config.dateFormat);
  return `## ${releaseVersion(release.version)} (${date})\n\n${notes}\n\n`;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

/**
 * GitLab's check that a version is already in a changelog: `^##\s*<version>\s` at any line
 * start. Ruby's `\s` and line starts are spelled out: JavaScript's differ.
 */
export function releaseHeaderPattern(version: string): RegExp {
  return new RegExp(`(?<![^\\n])##[ \\t\\r\\n\\f\\v]*${escapeRegExp(releaseVersion(version))}[ \\t\\r\\n\\f\\v]`);
}
