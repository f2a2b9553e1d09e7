import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { parseSecretKey } from './lib/secret-box.js';

/** Every setting Depot reads, validated once at start-up (DESIGN.md §3). */
export interface Config {
  port: number;
  host: string;
  /** External URL without a trailing slash, used in links, web_url and Link headers. */
  baseUrl: string;
  storageDir: string;
  /** Set → that PostgreSQL; unset → the embedded PostgreSQL server in `<storageDir>/db`. */
  databaseUrl: string | undefined;
  /** Server processes sharing the port, database, storages and jobs (node:cluster). */
  workers: number;
  /** Named storage roots, absolute paths. `default` always exists. */
  repositoryStorages: Record<string, string>;
  adminPassword: string | undefined;
  adminToken: string | undefined;
  logLevel: string;
  /** Seed a demo group and project on first start (default: on with the embedded database). */
  seedDemo: boolean;
  /**
   * Which plain-http redirect URIs OAuth applications may register: `any` (GitLab's
   * `force_ssl_in_redirect_uri false`) or `loopback` (only 127.0.0.1, [::1] and localhost, for
   * native apps: RFC 9700 §2.6, RFC 8252 §7.3).
   */
  oauthHttpRedirectUris: OauthHttpRedirectUris;
  /** Bytes the archive cache (STORAGE_DIR/cache/archive) may hold; 0 turns it off. */
  archiveCacheMaxBytes: number;
  /**
   * DEPOT_SECRET_KEY: the instance key that seals secrets Depot must read again (64 hex digits or
   * 32 bytes of base64); unset → generated into STORAGE_DIR/secret_key (src/lib/secret-box.ts).
   */
  secretKey: string | undefined;
  /**
   * SMTP_URL: where e-mail goes (`smtp://user:pass@host:587`, `smtps://…`); unset → integrations
   * that send mail (emails-on-push, pipelines-email) log that they could not.
   */
  smtpUrl: string | undefined;
  /** SMTP_FROM: the sender address of Depot's mail (GitLab's `email_from`); default `depot@<BASE_URL host>`. */
  emailFrom: string;
  /**
   * PAGES_HOST: the instance's own Pages domain (GitLab's `pages.host`); custom domains under it
   * are refused. Default: BASE_URL's host name.
   */
  pagesHost: string;
  /** DNS_SERVERS: resolvers for Pages domain verification (`ip[:port]`, comma separated); default the system's. */
  dnsServers: string[];
}

/** ARCHIVE_CACHE_MAX when unset: room for a few hundred release archives. */
export const DEFAULT_ARCHIVE_CACHE_MAX_BYTES = 5 * 1024 ** 3;

export const OAUTH_HTTP_REDIRECT_URIS = ['any', 'loopback'] as const;
export type OauthHttpRedirectUris = (typeof OAUTH_HTTP_REDIRECT_URIS)[number];

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
const STORAGE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

export class ConfigError extends Error {}

const envBoolean = (name: string, value: string | undefined, fallback: boolean): boolean => {
  if (value === undefined || value === '') return fallback;
  if (/^(1|true|yes|on)$/i.test(value)) return true;
  if (/^(0|false|no|off)$/i.test(value)) return false;
  throw new ConfigError(`${name} must be true or false, got "${value}"`);
};

const SIZE_UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** A size in bytes, or with a binary unit: `512M`, `5G`, `5GiB`, `0`. */
export function parseByteSize(name: string, value: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(value);
  const bytes = match ? Math.floor(Number(match[1]) * (SIZE_UNITS[(match[2] ?? '').toLowerCase()] ?? 1)) : Number.NaN;
  if (!Number.isSafeInteger(bytes))
    throw new ConfigError(`${name} must be a size such as 5G, 512M or 0, got "${value}"`);
  return bytes;
}

/** Parses `name=path,name=path`; relative paths are resolved against `cwd`. */
export function parseRepositoryStorages(value: string, cwd: string): Record<string, string> {
  const storages: Record<string, string> = {};
  for (const item of value.split(',')) {
    const entry = item.trim();
    if (entry === '') continue;
    const eq = entry.indexOf('=');
    if (eq <= 0 || eq === entry.length - 1) {
      throw new ConfigError(`REPOSITORY_STORAGES entries must look like name=path, got "${entry}"`);
    }
    const name = entry.slice(0, eq).trim();
    const dir = entry.slice(eq + 1).trim();
    if (!STORAGE_NAME.test(name)) {
      throw new ConfigError(`REPOSITORY_STORAGES: invalid storage name "${name}"`);
    }
    if (storages[name] !== undefined) {
      throw new ConfigError(`REPOSITORY_STORAGES: storage "${name}" is named twice`);
    }
    storages[name] = path.resolve(cwd, dir);
  }
  return storages;
}

/** Most server processes WORKERS may ask for. */
const MAX_WORKERS = 64;

/** WORKERS: a whole number of processes, or `auto` for one per core. Default 1. */
export function parseWorkers(value: string | undefined): number {
  if (value === undefined || value === '') return 1;
  if (value === 'auto') return Math.min(os.availableParallelism(), MAX_WORKERS);
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > MAX_WORKERS) {
    throw new ConfigError(`WORKERS must be a whole number from 1 to ${MAX_WORKERS} or "auto", got "${value}"`);
  }
  return n;
}

/** Reads the configuration from environment variables (all optional). */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): Config {
  const port = z.coerce
    .number()
    .int()
    .min(0)
    .max(65535)
    .safeParse(env.PORT ?? '8080');
  if (!port.success) throw new ConfigError(`PORT must be a port number, got "${env.PORT}"`);
  const host = env.HOST || '127.0.0.1';
  const storageDir = path.resolve(cwd, env.STORAGE_DIR || './storage');
  const logLevel = env.LOG_LEVEL || 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  }
  let baseUrl = env.BASE_URL || `http://${host.includes(':') ? `[${host}]` : host}:${port.data}`;
  try {
    const url = new URL(baseUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('protocol');
    baseUrl = url.toString().replace(/\/+$/, '');
  } catch {
    throw new ConfigError(`BASE_URL must be an http(s) URL, got "${env.BASE_URL}"`);
  }
  const storages = parseRepositoryStorages(
    env.REPOSITORY_STORAGES || `default=${path.join(storageDir, 'repositories', 'default')}`,
    cwd,
  );
  if (storages.default === undefined) {
    throw new ConfigError('REPOSITORY_STORAGES must name a storage called "default"');
  }
  const databaseUrl = env.DATABASE_URL || undefined;
  const workers = parseWorkers(env.WORKERS);
  const oauthHttpRedirectUris = env.OAUTH_HTTP_REDIRECT_URIS || 'any';
  if (!(OAUTH_HTTP_REDIRECT_URIS as readonly string[]).includes(oauthHttpRedirectUris)) {
    throw new ConfigError(
      `OAUTH_HTTP_REDIRECT_URIS must be one of ${OAUTH_HTTP_REDIRECT_URIS.join(', ')}, got "${oauthHttpRedirectUris}"`,
    );
  }
  const smtpUrl = env.SMTP_URL || undefined;
  if (smtpUrl !== undefined && !/^smtps?:\/\//.test(smtpUrl)) {
    throw new ConfigError(`SMTP_URL must start with smtp:// or smtps://, got "${smtpUrl}"`);
  }
  const secretKey = env.DEPOT_SECRET_KEY || undefined;
  if (secretKey !== undefined) {
    try {
      parseSecretKey(secretKey);
    } catch {
      throw new ConfigError('DEPOT_SECRET_KEY must be 32 bytes, as 64 hex digits or base64');
    }
  }
  const pagesHost = (env.PAGES_HOST || new URL(baseUrl).hostname).toLowerCase();
  const dnsServers = (env.DNS_SERVERS ?? '')
    .split(',')
    .map((server) => server.trim())
    .filter(Boolean);
  return {
    port: port.data,
    host,
    baseUrl,
    storageDir,
    databaseUrl,
    workers,
    repositoryStorages: storages,
    adminPassword: env.ADMIN_PASSWORD || undefined,
    adminToken: env.ADMIN_TOKEN || undefined,
    logLevel,
    seedDemo: envBoolean('SEED_DEMO', env.SEED_DEMO, databaseUrl === undefined),
    oauthHttpRedirectUris: oauthHttpRedirectUris as OauthHttpRedirectUris,
    archiveCacheMaxBytes: env.ARCHIVE_CACHE_MAX
      ? parseByteSize('ARCHIVE_CACHE_MAX', env.ARCHIVE_CACHE_MAX)
      : DEFAULT_ARCHIVE_CACHE_MAX_BYTES,
    secretKey,
    smtpUrl,
    emailFrom: env.SMTP_FROM || `depot@${new URL(baseUrl).hostname}`,
    pagesHost,
    dnsServers,
  };
}
