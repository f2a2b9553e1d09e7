import { RE2JS } from 're2js';
import { parse as parseYaml } from 'yaml';
import { parseDuration } from '../application-settings.js';

/**
 * The CI file (`.gitlab-ci.yml`) as GitLab's lib/gitlab/ci/config reads the subset Depot runs:
 * `stages`, `variables`, `default`, `workflow:rules`, the global `image`/`services`/
 * `before_script`/`after_script`, and jobs with `script`, `before_script`, `after_script`,
 * `image`, `services`, `variables`, `tags`, `stage`, `when`, `allow_failure`, `needs`,
 * `rules: - if:`, `only`/`except` (refs), `timeout`, `environment` and `artifacts`. A file that
 * cannot be read gives `errors` (GitLab's yaml_errors texts), never an exception.
 */

export const DEFAULT_STAGES = ['.pre', 'build', 'test', 'deploy', '.post'];
export const JOB_WHEN = ['on_success', 'on_failure', 'always', 'manual'] as const;
export type JobWhen = (typeof JOB_WHEN)[number];

/** The largest CI file read (GitLab's max_yaml_size_bytes default is 2 MB). */
export const MAX_CI_FILE_BYTES = 2 * 1024 * 1024;

export interface CiRule {
  if?: string;
  when?: string;
  allow_failure?: boolean;
  variables?: Record<string, string>;
}

export interface CiImage {
  name: string;
  entrypoint?: string[];
}

export interface CiArtifacts {
  paths: string[];
  name?: string;
  when: string;
  expire_in?: string;
  reports?: Record<string, string[]>;
  untracked: boolean;
}

export interface CiJob {
  name: string;
  stage: string;
  script: string[];
  before_script: string[];
  after_script: string[];
  image: CiImage | null;
  services: CiImage[];
  variables: Record<string, string>;
  tags: string[];
  when: JobWhen;
  allow_failure: boolean;
  needs: string[] | null;
  rules: CiRule[] | null;
  only: string[] | null;
  except: string[] | null;
  /** Seconds, or null for the project's. */
  timeout: number | null;
  environment: { name: string; url?: string; action?: string; on_stop?: string; auto_stop_in?: string } | null;
  artifacts: CiArtifacts | null;
}

export interface CiConfig {
  stages: string[];
  variables: Record<string, string>;
  workflowRules: CiRule[] | null;
  jobs: CiJob[];
}

export type ParsedConfig = { ok: true; config: CiConfig } | { ok: false; errors: string[] };

const RESERVED = new Set([
  'stages',
  'variables',
  'default',
  'workflow',
  'include',
  'image',
  'services',
  'before_script',
  'after_script',
  'cache',
  'types',
]);

class ConfigError extends Error {}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function stringList(
  value: unknown,
  where: string,
  what = 'config should be a string or a nested array of strings up to 10 levels deep',
): string[] {
  if (value === undefined || value === null) return [];
  const out: string[] = [];
  const walk = (v: unknown, depth: number) => {
    if (typeof v === 'string') out.push(v);
    else if (typeof v === 'number' || typeof v === 'boolean') out.push(String(v));
    else if (Array.isArray(v) && depth < 10) for (const item of v) walk(item, depth + 1);
    else throw new ConfigError(`${where} ${what}`);
  };
  walk(value, 0);
  return out;
}

function variablesOf(value: unknown, where: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (!isObject(value)) throw new ConfigError(`${where} config should be a hash of key value pairs`);
  const out: Record<string, string> = {};
  for (const [key, v] of Object.entries(value)) {
    if (isObject(v) && 'value' in v) out[key] = String(v.value ?? '');
    else if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') out[key] = String(v);
    else throw new ConfigError(`${where} config should be a hash of key value pairs`);
  }
  return out;
}

function imageOf(value: unknown, where: string): CiImage | null {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string') return { name: value };
  if (isObject(value) && typeof value.name === 'string') {
    return {
      name: value.name,
      ...(value.entrypoint !== undefined ? { entrypoint: stringList(value.entrypoint, `${where}:entrypoint`) } : {}),
    };
  }
  throw new ConfigError(`${where} config should be a hash or a string`);
}

function servicesOf(value: unknown, where: string): CiImage[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new ConfigError(`${where} config should be a array`);
  return value.map((v) => imageOf(v, where) as CiImage);
}

function rulesOf(value: unknown, where: string): CiRule[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) throw new ConfigError(`${where} config should be an array of hashes`);
  return value.map((rule) => {
    if (!isObject(rule)) throw new ConfigError(`${where} config should be an array of hashes`);
    if (rule.if !== undefined && typeof rule.if !== 'string')
      throw new ConfigError(`${where}:rule if invalid expression syntax`);
    if (typeof rule.if === 'string') checkExpression(rule.if, where);
    if (rule.when !== undefined && ![...JOB_WHEN, 'never', 'delayed'].includes(String(rule.when))) {
      throw new ConfigError(`${where}:rule when unknown value: ${String(rule.when)}`);
    }
    return {
      ...(typeof rule.if === 'string' ? { if: rule.if } : {}),
      ...(rule.when !== undefined ? { when: String(rule.when) } : {}),
      ...(typeof rule.allow_failure === 'boolean' ? { allow_failure: rule.allow_failure } : {}),
      ...(rule.variables !== undefined ? { variables: variablesOf(rule.variables, `${where}:variables`) } : {}),
    };
  });
}

function refsOf(value: unknown, where: string): string[] | null {
  if (value === undefined || value === null) return null;
  if (isObject(value)) return value.refs === undefined ? null : stringList(value.refs, `${where}:refs`);
  return stringList(value, where, 'config should be an array of strings or regular expressions');
}

function artifactsOf(value: unknown, where: string): CiArtifacts | null {
  if (value === undefined || value === null) return null;
  if (!isObject(value)) throw new ConfigError(`${where} config should be a hash`);
  const reports: Record<string, string[]> = {};
  if (isObject(value.reports)) {
    for (const [kind, paths] of Object.entries(value.reports))
      reports[kind] = stringList(paths, `${where}:reports:${kind}`);
  }
  const when = value.when === undefined ? 'on_success' : String(value.when);
  if (!['on_success', 'on_failure', 'always'].includes(when)) {
    throw new ConfigError(`${where}:when config should be on_success, on_failure or always`);
  }
  if (value.expire_in !== undefined && parseDuration(String(value.expire_in)) === undefined) {
    throw new ConfigError(`${where}:expire_in config should be a duration`);
  }
  return {
    paths: stringList(value.paths, `${where}:paths`),
    ...(value.name !== undefined ? { name: String(value.name) } : {}),
    when,
    ...(value.expire_in !== undefined ? { expire_in: String(value.expire_in) } : {}),
    ...(Object.keys(reports).length > 0 ? { reports } : {}),
    untracked: value.untracked === true,
  };
}

function environmentOf(value: unknown, where: string): CiJob['environment'] {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string') return { name: value };
  if (isObject(value) && typeof value.name === 'string') {
    const action = value.action === undefined ? undefined : String(value.action);
    if (action && !['start', 'prepare', 'stop', 'verify', 'access'].includes(action)) {
      throw new ConfigError(`${where}:action config should be start, stop, prepare, verify, or access`);
    }
    return {
      name: value.name,
      ...(value.url !== undefined ? { url: String(value.url) } : {}),
      ...(action ? { action } : {}),
      ...(value.on_stop !== undefined ? { on_stop: String(value.on_stop) } : {}),
      ...(value.auto_stop_in !== undefined ? { auto_stop_in: String(value.auto_stop_in) } : {}),
    };
  }
  throw new ConfigError(`${where} config should be a hash or a string`);
}

function needsOf(value: unknown, where: string): string[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) throw new ConfigError(`${where} config can only be a needs hash or array`);
  return value.map((need) => {
    if (typeof need === 'string') return need;
    if (isObject(need) && typeof need.job === 'string') return need.job;
    throw new ConfigError(`${where} config can only be a needs hash or array`);
  });
}

interface Defaults {
  image: unknown;
  services: unknown;
  before_script: unknown;
  after_script: unknown;
  tags: unknown;
  timeout: unknown;
}

function jobOf(name: string, raw: Record<string, unknown>, defaults: Defaults, stages: string[]): CiJob {
  const where = `jobs:${name}`;
  if (raw.script === undefined && raw.trigger === undefined) {
    throw new ConfigError(`${where} config should implement the script:, run:, or trigger: keyword`);
  }
  const stage = raw.stage === undefined ? 'test' : raw.stage;
  if (typeof stage !== 'string') throw new ConfigError(`${where}:stage config should be a string`);
  if (!stages.includes(stage)) {
    throw new ConfigError(
      `${name} job: chosen stage ${stage} does not exist; available stages are ${stages.join(', ')}`,
    );
  }
  const when = raw.when === undefined ? 'on_success' : String(raw.when);
  if (!(JOB_WHEN as readonly string[]).includes(when)) {
    throw new ConfigError(`${where} when should be one of: ${JOB_WHEN.join(', ')}, delayed`);
  }
  if (raw.allow_failure !== undefined && typeof raw.allow_failure !== 'boolean' && !isObject(raw.allow_failure)) {
    throw new ConfigError(`${where}:allow_failure config should be a hash or a boolean value`);
  }
  if (raw.rules !== undefined && (raw.only !== undefined || raw.except !== undefined)) {
    const keys = ['only', 'except'].filter((k) => raw[k] !== undefined).join(', ');
    throw new ConfigError(`${where} config key may not be used with \`rules\`: ${keys}`);
  }
  const timeoutValue = raw.timeout ?? defaults.timeout;
  let timeout: number | null = null;
  if (timeoutValue !== undefined && timeoutValue !== null) {
    const seconds = parseDuration(String(timeoutValue));
    if (seconds === undefined || seconds <= 0) throw new ConfigError(`${where}:timeout config should be a duration`);
    timeout = seconds;
  }
  return {
    name,
    stage,
    script: stringList(raw.script, `${where}:script`),
    before_script: stringList(raw.before_script ?? defaults.before_script, `${where}:before_script`),
    after_script: stringList(raw.after_script ?? defaults.after_script, `${where}:after_script`),
    image: imageOf(raw.image ?? defaults.image, `${where}:image`),
    services: servicesOf(raw.services ?? defaults.services, `${where}:services`),
    variables: variablesOf(raw.variables, `${where}:variables`),
    tags: stringList(raw.tags ?? defaults.tags, `${where}:tags`, 'config should be an array of strings'),
    when: when as JobWhen,
    // Manual jobs may fail by default, as in GitLab.
    allow_failure: raw.allow_failure === undefined ? when === 'manual' : raw.allow_failure === true,
    needs: needsOf(raw.needs, `${where}:needs`),
    rules: rulesOf(raw.rules, `${where}:rules`),
    only: refsOf(raw.only, `${where}:only`),
    except: refsOf(raw.except, `${where}:except`),
    timeout,
    environment: environmentOf(raw.environment, `${where}:environment`),
    artifacts: artifactsOf(raw.artifacts, `${where}:artifacts`),
  };
}

/** Reads a CI file's text into stages and jobs, or GitLab's errors. */
export function parseCiConfig(text: string): ParsedConfig {
  try {
    if (Buffer.byteLength(text) > MAX_CI_FILE_BYTES) throw new ConfigError('The parsed YAML is too big');
    let doc: unknown;
    try {
      doc = parseYaml(text, { merge: true, maxAliasCount: 100, uniqueKeys: false });
    } catch {
      throw new ConfigError('Invalid configuration format');
    }
    if (!isObject(doc)) throw new ConfigError('Invalid configuration format');
    const stagesRaw = doc.stages ?? doc.types;
    let stages = DEFAULT_STAGES;
    if (stagesRaw !== undefined) {
      const listed = stringList(stagesRaw, 'stages', 'config should be an array of strings');
      stages = ['.pre', ...listed.filter((s) => s !== '.pre' && s !== '.post'), '.post'];
    }
    const defaultsRaw = doc.default === undefined ? {} : doc.default;
    if (!isObject(defaultsRaw)) throw new ConfigError('default config should be a hash');
    const defaults: Defaults = {
      image: defaultsRaw.image ?? doc.image,
      services: defaultsRaw.services ?? doc.services,
      before_script: defaultsRaw.before_script ?? doc.before_script,
      after_script: defaultsRaw.after_script ?? doc.after_script,
      tags: defaultsRaw.tags,
      timeout: defaultsRaw.timeout,
    };
    let workflowRules: CiRule[] | null = null;
    if (doc.workflow !== undefined) {
      if (!isObject(doc.workflow)) throw new ConfigError('workflow config should be a hash');
      workflowRules = rulesOf(doc.workflow.rules, 'workflow:rules');
    }
    const variables = variablesOf(doc.variables, 'variables');
    const jobs: CiJob[] = [];
    for (const [name, value] of Object.entries(doc)) {
      if (RESERVED.has(name) || name.startsWith('.')) continue;
      if (!isObject(value)) throw new ConfigError(`jobs:${name} config should be a hash`);
      jobs.push(jobOf(name, value, defaults, stages));
    }
    if (jobs.length === 0) throw new ConfigError('jobs config should contain at least one visible job');
    const names = new Set(jobs.map((j) => j.name));
    for (const job of jobs) {
      for (const need of job.needs ?? []) {
        if (!names.has(need)) throw new ConfigError(`${job.name} job: undefined need: ${need}`);
        const needed = jobs.find((j) => j.name === need) as CiJob;
        if (stages.indexOf(needed.stage) > stages.indexOf(job.stage)) {
          throw new ConfigError(`${job.name} job: need ${need} is not defined in current or prior stages`);
        }
      }
    }
    return { ok: true, config: { stages, variables, workflowRules, jobs } };
  } catch (error) {
    if (error instanceof ConfigError) return { ok: false, errors: [error.message] };
    return { ok: false, errors: ['Invalid configuration format'] };
  }
}

// ---- rules: if: expressions -------------------------------------------------------------------

type Token =
  | { t: 'var'; name: string }
  | { t: 'str'; value: string }
  | { t: 're'; source: string; flags: string }
  | { t: 'null' }
  | { t: 'op'; op: '==' | '!=' | '=~' | '!~' | '&&' | '||' | '(' | ')' };

function tokenize(expr: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < expr.length) {
    const c = expr[i] as string;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const two = expr.slice(i, i + 2);
    if (['==', '!=', '=~', '!~', '&&', '||'].includes(two)) {
      tokens.push({ t: 'op', op: two as '==' });
      i += 2;
      continue;
    }
    if (c === '(' || c === ')') {
      tokens.push({ t: 'op', op: c });
      i++;
      continue;
    }
    if (c === '$') {
      const m = /^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/.exec(expr.slice(i));
      if (!m) throw new ConfigError('invalid expression syntax');
      tokens.push({ t: 'var', name: m[1] as string });
      i += m[0].length;
      continue;
    }
    if (c === '"' || c === "'") {
      const end = expr.indexOf(c, i + 1);
      if (end < 0) throw new ConfigError('invalid expression syntax');
      tokens.push({ t: 'str', value: expr.slice(i + 1, end) });
      i = end + 1;
      continue;
    }
    if (c === '/') {
      let j = i + 1;
      while (j < expr.length && expr[j] !== '/') j += expr[j] === '\\' ? 2 : 1;
      if (j >= expr.length) throw new ConfigError('invalid expression syntax');
      const flags = /^[a-z]*/.exec(expr.slice(j + 1))?.[0] ?? '';
      tokens.push({ t: 're', source: expr.slice(i + 1, j), flags });
      i = j + 1 + flags.length;
      continue;
    }
    if (expr.startsWith('null', i)) {
      tokens.push({ t: 'null' });
      i += 4;
      continue;
    }
    throw new ConfigError('invalid expression syntax');
  }
  return tokens;
}

type Value = string | null | { re: string; flags: string };

/** Evaluates a `rules: if:` expression against the pipeline's variables (GitLab's subset). */
export function evaluateExpression(expr: string, vars: Record<string, string>): boolean {
  const tokens = tokenize(expr);
  let pos = 0;
  const peek = () => tokens[pos];
  const operand = (): Value => {
    const tok = tokens[pos++];
    if (!tok) throw new ConfigError('invalid expression syntax');
    if (tok.t === 'var') return vars[tok.name] ?? null;
    if (tok.t === 'str') return tok.value;
    if (tok.t === 're') return { re: tok.source, flags: tok.flags };
    if (tok.t === 'null') return null;
    throw new ConfigError('invalid expression syntax');
  };
  const truthy = (v: Value) => typeof v === 'string' && v !== '';
  const matches = (left: Value, right: Value) => {
    if (typeof left !== 'string' || right === null || typeof right === 'string') return false;
    const flags = right.flags.includes('i') ? RE2JS.CASE_INSENSITIVE : 0;
    return RE2JS.compile(right.re, flags).matcher(left).find();
  };
  const comparison = (): boolean => {
    const tok = peek();
    if (tok?.t === 'op' && tok.op === '(') {
      pos++;
      const inner = or();
      const close = tokens[pos++];
      if (close?.t !== 'op' || close.op !== ')') throw new ConfigError('invalid expression syntax');
      return inner;
    }
    const left = operand();
    const op = peek();
    if (op?.t === 'op' && ['==', '!=', '=~', '!~'].includes(op.op)) {
      pos++;
      const right = operand();
      if (op.op === '==') return left === right;
      if (op.op === '!=') return left !== right;
      if (op.op === '=~') return matches(left, right);
      return !matches(left, right);
    }
    return truthy(left);
  };
  const and = (): boolean => {
    let value = comparison();
    for (let tok = peek(); tok?.t === 'op' && tok.op === '&&'; tok = peek()) {
      pos++;
      const right = comparison();
      value = value && right;
    }
    return value;
  };
  const or = (): boolean => {
    let value = and();
    for (let tok = peek(); tok?.t === 'op' && tok.op === '||'; tok = peek()) {
      pos++;
      const right = and();
      value = value || right;
    }
    return value;
  };
  const result = or();
  if (pos !== tokens.length) throw new ConfigError('invalid expression syntax');
  return result;
}

function checkExpression(expr: string, where: string): void {
  try {
    evaluateExpression(expr, {});
  } catch {
    throw new ConfigError(`${where}:rules:rule if invalid expression syntax`);
  }
}

/** The first rule that matches, or undefined (GitLab: no match means the job is left out). */
export function matchRules(rules: CiRule[], vars: Record<string, string>): CiRule | undefined {
  return rules.find((rule) => rule.if === undefined || evaluateExpression(rule.if, vars));
}

/** `only`/`except` refs: keywords (`branches`, `tags`, `pushes`, `api`, `web`...), names and /regex/. */
export function refsMatch(patterns: string[], ref: { name: string; tag: boolean; source: string }): boolean {
  return patterns.some((pattern) => {
    if (pattern === 'branches') return !ref.tag;
    if (pattern === 'tags') return ref.tag;
    if (['pushes', 'api', 'web', 'schedules', 'triggers', 'merge_requests'].includes(pattern)) {
      return pattern === (ref.source === 'push' ? 'pushes' : ref.source);
    }
    const re = /^\/(.+)\/([a-z]*)$/.exec(pattern);
    if (re) {
      try {
        const flags = (re[2] ?? '').includes('i') ? RE2JS.CASE_INSENSITIVE : 0;
        return RE2JS.compile(re[1] as string, flags)
          .matcher(ref.name)
          .find();
      } catch {
        return false;
      }
    }
    return pattern === ref.name;
  });
}
