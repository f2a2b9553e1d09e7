import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeSampleProject, makeUser } from '../support/factories.js';

let app: TestApp;
let owner: User;
let project: Project;

/** Where `--output=<file>` would write if a value ever reached git as an option. */
const marker = path.join(os.tmpdir(), `depot-pwned-${process.pid}-${Date.now()}`);

/**
 * Hostile values, already URL-encoded so they fit a path segment or a query value: options,
 * NUL, newlines, ranges and traversal, absolute paths, slashes encoded twice, spaces, an
 * unknown sha.
 */
const BAD = [
  encodeURIComponent(`--output=${marker}`),
  '-n1',
  'main%00',
  'main%0A',
  'main%0Amain',
  'main..stable',
  '..%2F..%2Fetc%2Fpasswd',
  '%2Fetc%2Fpasswd',
  'main%252Fx',
  'ma%20in',
  '0000000000000000000000000000000000000000',
];

interface Slot {
  name: string;
  url: (value: string) => string;
  /** Lists answer an empty list for refs that name nothing, as GitLab does. */
  list?: boolean;
}

const slots = (): Slot[] => {
  const r = `/projects/${project.id}/repository`;
  return [
    { name: 'tree ref', url: (v) => `${r}/tree?ref=${v}` },
    { name: 'tree path', url: (v) => `${r}/tree?path=${v}` },
    { name: 'blob', url: (v) => `${r}/blobs/${v}` },
    { name: 'blob raw', url: (v) => `${r}/blobs/${v}/raw` },
    { name: 'archive sha', url: (v) => `${r}/archive.tar?sha=${v}` },
    { name: 'archive path', url: (v) => `${r}/archive.zip?path=${v}` },
    { name: 'compare from', url: (v) => `${r}/compare?from=${v}&to=main` },
    { name: 'compare to', url: (v) => `${r}/compare?from=main&to=${v}` },
    { name: 'contributors ref', url: (v) => `${r}/contributors?ref=${v}`, list: true },
    { name: 'merge_base', url: (v) => `${r}/merge_base?refs[]=main&refs[]=${v}` },
    { name: 'commits ref_name', url: (v) => `${r}/commits?ref_name=${v}`, list: true },
    { name: 'commits path', url: (v) => `${r}/commits?path=${v}`, list: true },
    { name: 'commit', url: (v) => `${r}/commits/${v}` },
    { name: 'commit diff', url: (v) => `${r}/commits/${v}/diff` },
    { name: 'file path', url: (v) => `${r}/files/${v}?ref=main` },
    { name: 'file ref', url: (v) => `${r}/files/README.md?ref=${v}` },
    { name: 'raw file path', url: (v) => `${r}/files/${v}/raw` },
    { name: 'raw file ref', url: (v) => `${r}/files/README.md/raw?ref=${v}` },
    { name: 'branch', url: (v) => `${r}/branches/${v}` },
    { name: 'tag', url: (v) => `${r}/tags/${v}` },
  ];
};

/** GitLab's two error shapes: `{"message": ...}` or `{"error": ...}`, one key. */
function isErrorShape(body: unknown): boolean {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
  const keys = Object.keys(body);
  return keys.length === 1 && (keys[0] === 'message' || keys[0] === 'error');
}

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
  ({ project } = await makeSampleProject(app, owner, { path: 'hostile' }));
});
afterAll(async () => {
  fs.rmSync(marker, { force: true });
  await app?.close();
});

describe('hostile input on every read endpoint', () => {
  it('answers 4xx in GitLab’s error shape (or an empty list where GitLab lists nothing), never 500', async () => {
    const outcomes: string[] = [];
    for (const slot of slots()) {
      for (const value of BAD) {
        const res = await app.request(slot.url(value));
        const emptyList = slot.list === true && res.status === 200 && Array.isArray(res.body) && res.body.length === 0;
        // GitLab strips compare refs (Gitlab::Git::Compare) and merge_base list items
        // (CommaSeparatedToArray): `main\n` is `main` there.
        const stripped = value === 'main%0A' && (slot.name.startsWith('compare') || slot.name === 'merge_base');
        const ok =
          (stripped && res.status === 200) ||
          emptyList ||
          (res.status >= 400 && res.status < 500 && isErrorShape(res.body));
        if (!ok) outcomes.push(`${slot.name} ${decodeURIComponent(value)}: ${res.status} ${res.text.slice(0, 120)}`);
      }
    }
    expect(outcomes).toEqual([]);
    expect(fs.existsSync(marker)).toBe(false);
  });

  it('gives the GitLab message each endpoint uses for an option-like value', async () => {
    const r = `/projects/${project.id}/repository`;
    const v = encodeURIComponent(`--output=${marker}`);
    const expected: [string, number, unknown][] = [
      [`${r}/tree?ref=${v}`, 404, { message: '404 Tree Not Found' }],
      [`${r}/blobs/${v}`, 404, { message: '404 Blob Not Found' }],
      [`${r}/archive.tar?sha=${v}`, 404, { message: '404 File Not Found' }],
      [`${r}/compare?from=${v}&to=main`, 404, { message: '404 Ref Not Found' }],
      [`${r}/contributors?ref=${v}`, 404, { message: '404 Not Found' }],
      [`${r}/merge_base?refs[]=main&refs[]=${v}`, 400, { message: `Could not find ref: --output=${marker}` }],
      [`${r}/commits?ref_name=${v}`, 400, { message: 'ref_name is invalid' }],
      [`${r}/commits/${v}`, 404, { message: '404 Commit Not Found' }],
      [`${r}/commits/${v}/diff`, 404, { message: '404 Commit Not Found' }],
      [`${r}/files/README.md?ref=${v}`, 404, { message: '404 Commit Not Found' }],
      [`${r}/files/README.md/raw?ref=${v}`, 404, { message: '404 Commit Not Found' }],
      [`${r}/branches/${v}`, 400, { message: 'The branch refname is invalid' }],
      [`${r}/tags/${v}`, 404, { message: '404 Tag Not Found' }],
      [`${r}/files/${v}?ref=main`, 404, { message: '404 File Not Found' }],
    ];
    for (const [url, status, body] of expected) {
      const res = await app.request(url);
      expect({ url, status: res.status, body: res.body }).toEqual({ url, status, body });
    }
    expect(fs.existsSync(marker)).toBe(false);
  });

  it('refuses NUL bytes with 400 Bad request everywhere', async () => {
    for (const slot of slots()) {
      const res = await app.request(slot.url('main%00'));
      expect({ slot: slot.name, status: res.status, body: res.body }).toEqual({
        slot: slot.name,
        status: 400,
        body: { message: '400 Bad request' },
      });
    }
  });
});

describe('pagination parameters on every read list', () => {
  const lists = () => {
    const r = `/projects/${project.id}/repository`;
    return [`${r}/tree`, `${r}/commits`, `${r}/commits/main/diff`, `${r}/contributors`, `${r}/branches`, `${r}/tags`];
  };

  it('clamps a huge per_page to 100', async () => {
    for (const url of lists()) {
      const res = await app.request(`${url}?per_page=1000000`);
      expect({ url, status: res.status, perPage: res.headers.get('x-per-page') }).toEqual({
        url,
        status: 200,
        perPage: '100',
      });
    }
  });

  it('refuses non-numeric, zero and negative values with Grape’s messages', async () => {
    const cases: [string, string][] = [
      ['page=two', 'page is invalid'],
      ['per_page=many', 'per_page is invalid'],
      ['page=0', 'page does not have a valid value'],
      ['per_page=0', 'per_page does not have a valid value'],
      ['per_page=-5', 'per_page does not have a valid value'],
      ['page=1.5', 'page is invalid'],
    ];
    for (const url of lists()) {
      for (const [query, error] of cases) {
        const res = await app.request(`${url}?${query}`);
        expect({ url, query, status: res.status, body: res.body }).toEqual({
          url,
          query,
          status: 400,
          body: { error },
        });
      }
    }
  });
});
