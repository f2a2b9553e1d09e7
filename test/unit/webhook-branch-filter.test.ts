import { describe, expect, it } from 'vitest';
import { branchFilterMatches, wildcardMatches } from '../../src/services/webhooks.js';

describe('webhook branch filters', () => {
  it('wildcard: * matches any run of characters, slashes too; the rest literally', () => {
    expect(wildcardMatches('main', 'main')).toBe(true);
    expect(wildcardMatches('main', 'main2')).toBe(false);
    expect(wildcardMatches('release/*', 'release/1.0')).toBe(true);
    expect(wildcardMatches('release/*', 'release/1.0/hotfix')).toBe(true);
    expect(wildcardMatches('release/*', 'releases/1.0')).toBe(false);
    expect(wildcardMatches('*-stable', '15-stable')).toBe(true);
    expect(wildcardMatches('f*e*x', 'feature-box')).toBe(true);
    expect(wildcardMatches('v1.?', 'v1.2')).toBe(false);
    expect(wildcardMatches('v1.?', 'v1.?')).toBe(true);
    expect(wildcardMatches('*', '')).toBe(true);
  });

  it('a pathological pattern answers at once', () => {
    const started = Date.now();
    expect(wildcardMatches(`${'a*'.repeat(40)}b`, 'a'.repeat(250))).toBe(false);
    expect(Date.now() - started).toBeLessThan(200);
  });

  it('strategies: comma lists, RE2 regular expressions, all branches', () => {
    expect(branchFilterMatches('wildcard', 'main, release/*', 'release/2')).toBe(true);
    expect(branchFilterMatches('wildcard', 'main, release/*', 'dev')).toBe(false);
    expect(branchFilterMatches('wildcard', null, 'dev')).toBe(true);
    expect(branchFilterMatches('regex', '^feat-\\d+$', 'feat-12')).toBe(true);
    expect(branchFilterMatches('regex', '^feat-\\d+$', 'feat-x')).toBe(false);
    expect(branchFilterMatches('all_branches', 'main', 'dev')).toBe(true);
  });
});
