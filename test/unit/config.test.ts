import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('configuration', () => {
  it('has the embedded defaults', () => {
    const config = loadConfig({}, '/srv/depot');
    expect(config).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      baseUrl: 'http://127.0.0.1:8080',
      storageDir: '/srv/depot/storage',
      databaseUrl: undefined,
      repositoryStorages: { default: '/srv/depot/storage/repositories/default' },
      logLevel: 'info',
      seedDemo: true,
      oauthHttpRedirectUris: 'any',
      workers: 1,
    });
  });

  it('reads every variable', () => {
    const config = loadConfig(
      {
        PORT: '9000',
        HOST: '0.0.0.0',
        BASE_URL: 'https://git.example.com/',
        STORAGE_DIR: 'data',
        DATABASE_URL: 'postgres://u@db/depot',
        REPOSITORY_STORAGES: 'default=/a, ssd=b',
        ADMIN_PASSWORD: 'secret-password',
        ADMIN_TOKEN: 'glpat-abc',
        LOG_LEVEL: 'warn',
        OAUTH_HTTP_REDIRECT_URIS: 'loopback',
        WORKERS: '3',
      },
      '/srv',
    );
    expect(config).toMatchObject({
      port: 9000,
      host: '0.0.0.0',
      baseUrl: 'https://git.example.com',
      storageDir: '/srv/data',
      databaseUrl: 'postgres://u@db/depot',
      repositoryStorages: { default: '/a', ssd: '/srv/b' },
      adminPassword: 'secret-password',
      adminToken: 'glpat-abc',
      logLevel: 'warn',
      seedDemo: false,
      oauthHttpRedirectUris: 'loopback',
      workers: 3,
    });
    expect(loadConfig({ WORKERS: 'auto' }).workers).toBe(Math.min(os.availableParallelism(), 64));
  });

  it('refuses bad values with a clear message', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(ConfigError);
    expect(() => loadConfig({ LOG_LEVEL: 'loud' })).toThrow(/LOG_LEVEL/);
    expect(() => loadConfig({ BASE_URL: 'ftp://x' })).toThrow(/BASE_URL/);
    expect(() => loadConfig({ REPOSITORY_STORAGES: 'ssd=/x' })).toThrow(/default/);
    expect(() => loadConfig({ REPOSITORY_STORAGES: 'default=/a,default=/b' })).toThrow(/twice/);
    expect(() => loadConfig({ REPOSITORY_STORAGES: '../x=/a,default=/b' })).toThrow(/invalid storage name/);
    expect(() => loadConfig({ SEED_DEMO: 'perhaps' })).toThrow(/SEED_DEMO/);
    for (const bad of ['0', '-1', '1.5', 'many', '65']) {
      expect(() => loadConfig({ WORKERS: bad })).toThrow(
        `WORKERS must be a whole number from 1 to 64 or "auto", got "${bad}"`,
      );
    }
    expect(() => loadConfig({ OAUTH_HTTP_REDIRECT_URIS: 'https' })).toThrow(
      'OAUTH_HTTP_REDIRECT_URIS must be one of any, loopback, got "https"',
    );
    expect(() => loadConfig({ ARCHIVE_CACHE_MAX: 'lots' })).toThrow(
      'ARCHIVE_CACHE_MAX must be a size such as 5G, 512M or 0, got "lots"',
    );
  });

  it('reads ARCHIVE_CACHE_MAX as bytes or with a binary unit; 5 GiB by default, 0 for none', () => {
    const max = (value?: string) =>
      loadConfig(value === undefined ? {} : { ARCHIVE_CACHE_MAX: value }).archiveCacheMaxBytes;
    expect(max()).toBe(5 * 1024 ** 3);
    expect(max('0')).toBe(0);
    expect(max('1048576')).toBe(1024 ** 2);
    expect(max('512M')).toBe(512 * 1024 ** 2);
    expect(max('2GiB')).toBe(2 * 1024 ** 3);
    expect(max('1.5g')).toBe(1.5 * 1024 ** 3);
  });
});
