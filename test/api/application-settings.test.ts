import { Gitlab } from '@gitbeaker/rest';
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { WATCHED_TABLES } from '../../src/db/lookup-cache.js';
import { MASKED } from '../../src/services/application-settings.js';
import { DEPRECATED_NAMES, SETTINGS, type SettingDefinition } from '../../src/services/settings-catalog.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken, makeUserWithToken } from '../support/factories.js';

let app: TestApp;
let adminToken: string;
let adminId: number;
let userToken: string;

beforeAll(async () => {
  app = await startTestApp();
  const admin = await makeAdmin(app, { name: 'Ada Admin' });
  adminId = admin.id;
  // The round trip turns admin_mode on: the token then needs its scope to stay administrator.
  adminToken = await makeToken(app, admin, ['api', 'admin_mode']);
  userToken = (await makeUserWithToken(app)).token;
});
afterAll(async () => {
  await app?.close();
});
/** Each test starts from GitLab's defaults (the trail and plan limits are kept). */
beforeEach(async () => {
  await app.deps.db.deleteFrom('application_settings').where('key', '<>', 'instance').execute();
});

const put = (body: unknown, token = adminToken) => app.request('/application/settings', { method: 'PUT', token, body });
const read = async () => (await app.request('/application/settings', { token: adminToken })).body;

/** Not written through the API as such: GitLab drops it (hashed storage cannot be turned off). */
const NOT_WRITABLE = new Set(['hashed_storage_enabled']);

const STRING_SAMPLES: Record<string, string> = {
  abuse_notification_email: 'abuse@example.com',
  after_sign_out_path: 'https://example.com/bye',
  home_page_url: 'https://example.com/home',
  help_page_support_url: 'https://example.com/support',
  asset_proxy_url: 'https://proxy.example.com',
  external_authorization_service_url: 'https://auth.example.com',
  default_artifacts_expire_in: '7 days',
  archive_builds_in_human_readable: '2 days',
  personal_access_token_prefix: 'xyz-',
  default_branch_name: 'trunk',
  eks_account_id: '123456789012',
  eks_access_key_id: 'AKIAEXAMPLEKEY1234',
  commit_email_hostname: 'users.noreply.example.com',
  default_ci_config_path: 'ci/pipeline.yml',
  enabled_git_access_protocol: 'ssh',
};
const LIST_SAMPLES: Record<string, string[]> = {
  import_sources: ['git', 'github'],
  restricted_visibility_levels: ['public'],
};

/** A valid value for every attribute, different from its default. */
function sample(def: SettingDefinition): unknown {
  switch (def.kind) {
    case 'boolean':
      return !def.default;
    case 'integer':
      return def.values ? def.values[1] : ((def.default as number | null) ?? 0) + 1;
    case 'float':
      return (def.default as number) + 0.25;
    case 'string':
      return STRING_SAMPLES[def.name] ?? `value of ${def.name}`;
    case 'strings':
    case 'visibility_levels':
      return LIST_SAMPLES[def.name] ?? [`${def.name.replaceAll('_', '-')}.example.com`, '*.example.org'];
    case 'integers':
      return [1, 2];
    case 'visibility':
      return 'internal';
    case 'weights':
      return { default: 50 };
  }
}

const writable = SETTINGS.filter((d) => !NOT_WRITABLE.has(d.name));
const SECRETS = SETTINGS.filter((d) => d.secret);

describe('application settings: every attribute', () => {
  it("answers GitLab's defaults with id, created_at and updated_at", async () => {
    const body = await read();
    expect(body).toMatchObject({ id: 1, created_at: expect.stringMatching(/Z$/), updated_at: expect.any(String) });
    for (const def of SETTINGS) {
      if (def.hidden) expect(body, def.name).not.toHaveProperty(def.name);
      else if (def.kind !== 'weights') expect(body[def.name], def.name).toEqual(def.default);
    }
    expect(body).toMatchObject({
      default_branch_protection: 2,
      default_projects_limit: 100000,
      default_project_visibility: 'private',
      max_import_size: 0,
      signup_enabled: true,
      repository_storages: ['default'],
      spam_filter_enabled: false,
    });
  });

  it('round-trips every attribute through a JSON PUT, and GET answers the same', async () => {
    const change = Object.fromEntries(writable.map((d) => [d.name, sample(d)]));
    const res = await put(change);
    expect(res.status, res.text).toBe(200);
    const got = await read();
    for (const def of writable) {
      if (def.hidden) {
        expect(res.body, def.name).not.toHaveProperty(def.name);
        continue;
      }
      const expected = def.name === 'enabled_git_access_protocol' ? 'ssh' : sample(def);
      expect(res.body[def.name], def.name).toEqual(expected);
      expect(got[def.name], def.name).toEqual(expected);
      if (def.alias) expect(got[def.alias], def.alias).toEqual(expected);
    }
    expect(new Date(got.updated_at).getTime()).toBeGreaterThanOrEqual(new Date(got.created_at).getTime());
  });

  it('takes query, form and comma or [] arrays alike, and the spec’s neutral names', async () => {
    const form = new URLSearchParams();
    form.append('domain_allowlist[]', 'a.example.com');
    form.append('domain_allowlist[]', 'b.example.com');
    form.append('default_projects_limit', '42');
    form.append('search_engine_indexing', 'true');
    const viaForm = await put(form);
    expect(viaForm.status, viaForm.text).toBe(200);
    expect(viaForm.body).toMatchObject({
      domain_allowlist: ['a.example.com', 'b.example.com'],
      default_projects_limit: 42,
      elasticsearch_indexing: true,
      search_engine_indexing: true,
    });
    const viaQuery = await app.request('/application/settings', {
      method: 'PUT',
      token: adminToken,
      query: { import_sources: 'git,github', polling_interval_multiplier: '1.5', first_day_of_week: '1' },
    });
    expect(viaQuery.status, viaQuery.text).toBe(200);
    expect(viaQuery.body).toMatchObject({
      import_sources: ['git', 'github'],
      polling_interval_multiplier: 1.5,
      first_day_of_week: 1,
    });
  });

  it('writes deprecated names to their successors and reads them back under both', async () => {
    const res = await put({
      admin_notification_email: 'old@example.com',
      asset_proxy_whitelist: 'cdn.example.com,*.img.example.com',
      allow_local_requests_from_hooks_and_services: true,
      repository_storages: ['default'],
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({
      abuse_notification_email: 'old@example.com',
      admin_notification_email: 'old@example.com',
      asset_proxy_allowlist: ['cdn.example.com', '*.img.example.com'],
      asset_proxy_whitelist: ['cdn.example.com', '*.img.example.com'],
      allow_local_requests_from_web_hooks_and_services: true,
      allow_local_requests_from_hooks_and_services: true,
      repository_storages_weighted: { default: 100 },
      repository_storages: ['default'],
    });
    for (const [old, successor] of Object.entries(DEPRECATED_NAMES)) expect(res.body[old]).toEqual(res.body[successor]);
    expect((await put({ hashed_storage_enabled: false })).body.hashed_storage_enabled).toBe(true);
  });
});

describe('application settings: validation', () => {
  it('refuses an unknown enum value with Grape’s message', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ default_project_visibility: 'secret' }, 'default_project_visibility does not have a valid value'],
      [{ default_group_visibility: 'x' }, 'default_group_visibility does not have a valid value'],
      [{ default_snippet_visibility: 'x' }, 'default_snippet_visibility does not have a valid value'],
      [{ enabled_git_access_protocol: 'ftp' }, 'enabled_git_access_protocol does not have a valid value'],
      [{ default_branch_protection: 5 }, 'default_branch_protection does not have a valid value'],
      [{ default_project_creation: 3 }, 'default_project_creation does not have a valid value'],
      [{ rsa_key_restriction: 1000 }, 'rsa_key_restriction does not have a valid value'],
      [{ dsa_key_restriction: 4096 }, 'dsa_key_restriction does not have a valid value'],
      [{ ecdsa_key_restriction: 255 }, 'ecdsa_key_restriction does not have a valid value'],
      [{ ed25519_key_restriction: 512 }, 'ed25519_key_restriction does not have a valid value'],
      [{ default_projects_limit: 'many' }, 'default_projects_limit is invalid'],
      [{ signup_enabled: 'maybe' }, 'signup_enabled is invalid'],
    ];
    for (const [body, error] of cases) expect(await put(body), error).toMatchObject({ status: 400, body: { error } });
  });

  it('refuses a feature switched on without its companions (Grape’s "is missing")', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ akismet_enabled: true }, 'akismet_api_key is missing'],
      [{ spam_filter_enabled: true }, 'spam_filter_api_key is missing'],
      [
        { external_authorization_service_enabled: true },
        'external_authorization_service_url is missing, external_authorization_service_default_label is missing, external_authorization_service_timeout is missing',
      ],
      [
        { housekeeping_enabled: true },
        'housekeeping_bitmaps_enabled is missing, housekeeping_full_repack_period is missing, housekeeping_gc_period is missing, housekeeping_incremental_repack_period is missing',
      ],
      [
        { eks_integration_enabled: true, eks_account_id: '123456789012' },
        'eks_access_key_id is missing, eks_secret_access_key is missing',
      ],
      [{ plantuml_enabled: true }, 'plantuml_url is missing'],
      [{ kroki_enabled: true }, 'kroki_url is missing'],
      [{ mailgun_events_enabled: true }, 'mailgun_signing_key is missing'],
    ];
    for (const [body, error] of cases) expect(await put(body), error).toMatchObject({ status: 400, body: { error } });
  });

  it('refuses what the model refuses, in GitLab’s {"message": {field: [...]}} shape', async () => {
    const cases: [Record<string, unknown>, Record<string, string[]>][] = [
      [{ deletion_adjourned_period: 91 }, { deletion_adjourned_period: ['must be less than or equal to 90'] }],
      [{ deletion_adjourned_period: -1 }, { deletion_adjourned_period: ['must be greater than or equal to 0'] }],
      [
        { external_authorization_service_timeout: 10.5 },
        { external_authorization_service_timeout: ['must be less than or equal to 10'] },
      ],
      [
        { external_authorization_service_timeout: 0 },
        { external_authorization_service_timeout: ['must be greater than 0'] },
      ],
      [
        { archive_builds_in_human_readable: '3 hours' },
        { archive_builds_in_seconds: ['must be greater than or equal to 86400'] },
      ],
      [
        { archive_builds_in_human_readable: 'soon' },
        { archive_builds_in_human_readable: ['is not a correct duration'] },
      ],
      [{ default_artifacts_expire_in: 'whenever' }, { default_artifacts_expire_in: ['is not a correct duration'] }],
      [{ first_day_of_week: 3 }, { first_day_of_week: ['is not included in the list'] }],
      [{ enforce_terms: true }, { terms: ['You need to set terms to be enforced'] }],
      [
        { asset_proxy_enabled: true },
        { asset_proxy_url: ["can't be blank"], asset_proxy_secret_key: ["can't be blank"] },
      ],
      [
        { domain_denylist_enabled: true },
        { domain_denylist: ['Domain denylist cannot be empty if denylist is enabled.'] },
      ],
      [
        { domain_denylist_enabled: true, domain_denylist: [] },
        { domain_denylist: ['Domain denylist cannot be empty if denylist is enabled.'] },
      ],
      [{ diff_max_patch_bytes: 100 }, { diff_max_patch_bytes: ['must be greater than or equal to 204800'] }],
      [{ diff_max_files: 5000 }, { diff_max_files: ['must be less than or equal to 3000'] }],
      [{ max_attachment_size: 0 }, { max_attachment_size: ['must be greater than 0'] }],
      [{ default_projects_limit: -1 }, { default_projects_limit: ['must be greater than or equal to 0'] }],
      [
        { housekeeping_incremental_repack_period: 100 },
        { housekeeping_full_repack_period: ['must be greater than or equal to 100'] },
      ],
      [{ abuse_notification_email: 'not-an-email' }, { abuse_notification_email: ['is invalid'] }],
      [
        { home_page_url: 'javascript:alert(1)' },
        { home_page_url: ['is blocked: Only allowed schemes are http, https'] },
      ],
      [
        { personal_access_token_prefix: 'a prefix that is far too long' },
        {
          personal_access_token_prefix: [
            "can contain only letters of the Base64 alphabet (RFC4648) with the addition of '@', ':' and '.'",
            'is too long (maximum is 20 characters)',
          ],
        },
      ],
      [
        { restricted_visibility_levels: ['secret'] },
        { restricted_visibility_levels: ["'secret' is not a valid visibility level"] },
      ],
      [{ import_sources: ['cvs'] }, { import_sources: ["'cvs' is not a import source"] }],
      [
        { default_ci_config_path: '../secrets.yml' },
        { default_ci_config_path: ['cannot include leading slash or directory traversal.'] },
      ],
    ];
    for (const [body, message] of cases) {
      expect(await put(body), JSON.stringify(body)).toMatchObject({ status: 400, body: { message } });
    }
  });

  it('checks the companions and orderings the model requires once the switches are on', async () => {
    const cases: [Record<string, unknown>, Record<string, string[]>][] = [
      [
        {
          external_authorization_service_enabled: true,
          external_authorization_service_url: 'ftp://auth.example.com',
          external_authorization_service_default_label: '',
          external_authorization_service_timeout: 11,
        },
        {
          external_authorization_service_timeout: ['must be less than or equal to 10'],
          external_authorization_service_default_label: ["can't be blank"],
          external_authorization_service_url: ['is blocked: Only allowed schemes are http, https'],
        },
      ],
      [
        {
          eks_integration_enabled: true,
          eks_account_id: '12345',
          eks_access_key_id: 'short',
          eks_secret_access_key: 'x',
        },
        {
          eks_account_id: ['must be a 12-digit number'],
          eks_access_key_id: ['is the wrong length (should be 16 to 128 characters)'],
        },
      ],
      [{ mailgun_events_enabled: true, mailgun_signing_key: '' }, { mailgun_signing_key: ["can't be blank"] }],
      [{ gitaly_timeout_fast: 40 }, { gitaly_timeout_medium: ['must be greater than or equal to 40'] }],
      [{ gitaly_timeout_default: 60 }, { gitaly_timeout_default: ['must be less than or equal to 57'] }],
      [
        { wiki_page_max_content_bytes: 1000 },
        { wiki_page_max_content_bytes: ['must be greater than or equal to 1024'] },
      ],
      [{ external_auth_client_cert: 'PEM' }, { external_auth_client_key: ["can't be blank"] }],
      [
        { max_personal_access_token_lifetime: 366 },
        { max_personal_access_token_lifetime: ['must be less than or equal to 365'] },
      ],
    ];
    for (const [body, message] of cases) {
      expect(await put(body), JSON.stringify(body)).toMatchObject({ status: 400, body: { message } });
    }
  });

  it('reads null as the attribute left out, as python-gitlab sends unset attributes', async () => {
    const res = await put({ signup_enabled: false, home_page_url: null, default_projects_limit: null });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ signup_enabled: false, home_page_url: null, default_projects_limit: 100000 });
  });

  it('changes nothing when one attribute of a PUT is invalid, and records nothing', async () => {
    const before = await read();
    const events = (await app.request('/audit_events', { token: adminToken, query: { per_page: 100 } })).headers.get(
      'x-total',
    );
    const res = await put({ default_projects_limit: 7, signup_enabled: false, deletion_adjourned_period: 91 });
    expect(res.status).toBe(400);
    expect(await read()).toEqual(before);
    const after = await app.request('/audit_events', { token: adminToken, query: { per_page: 100 } });
    expect(after.headers.get('x-total')).toBe(events);
    const grape = await put({ default_projects_limit: 7, default_project_visibility: 'secret' });
    expect(grape.status).toBe(400);
    expect(await read()).toEqual(before);
  });
});

describe('application settings: who may', () => {
  it('answers 403 to other users and 401 to anonymous callers, for every settings route', async () => {
    for (const path of ['/application/settings', '/application/plan_limits', '/audit_events', '/audit_events/1']) {
      expect((await app.request(path, { token: userToken })).status, path).toBe(403);
      expect((await app.request(path)).status, path).toBe(401);
    }
    expect((await put({ signup_enabled: false }, userToken)).status).toBe(403);
    // Before the parameters, as GitLab's `before { authenticated_as_admin! }`.
    expect(await put({ default_project_visibility: 'secret' }, userToken)).toMatchObject({
      status: 403,
      body: { message: '403 Forbidden' },
    });
    expect(await app.request('/application/settings', { method: 'PUT', body: {} })).toMatchObject({
      status: 401,
      body: { message: '401 Unauthorized' },
    });
    expect(
      (
        await app.request('/application/plan_limits', {
          method: 'PUT',
          token: userToken,
          query: { plan_name: 'default' },
        })
      ).status,
    ).toBe(403);
    expect(
      (await app.request('/application/settings', { method: 'PUT', body: { signup_enabled: false } })).status,
    ).toBe(401);
  });
});

describe('application settings: secrets', () => {
  it('are sealed in the database, answered only where GitLab answers them, and masked in the trail', async () => {
    const values = Object.fromEntries(SECRETS.map((d) => [d.name, `clear-${d.name}-secret`]));
    const res = await put(values);
    expect(res.status, res.text).toBe(200);
    for (const def of SECRETS) {
      if (def.hidden) expect(res.body, def.name).not.toHaveProperty(def.name);
      else expect(res.body[def.name], def.name).toBe(`clear-${def.name}-secret`);
    }
    const rows = await app.deps.db
      .selectFrom('application_settings')
      .select(['key', 'value'])
      .where(
        'key',
        'in',
        SECRETS.map((d) => d.name),
      )
      .execute();
    expect(rows).toHaveLength(SECRETS.length);
    for (const row of rows) {
      const text = JSON.stringify(row.value);
      expect(text, row.key).not.toContain('clear-');
      expect(text, row.key).toMatch(/^\{"sealed":"v1\./);
    }
    const trail = await app.request('/audit_events', { token: adminToken, query: { per_page: 100 } });
    // This PUT's events are the newest: one per secret, none in clear.
    const secretEvents = trail.body.slice(0, SECRETS.length);
    expect(secretEvents.map((e: { details: { change: string } }) => e.details.change).sort()).toEqual(
      SECRETS.map((d) => d.name).sort(),
    );
    for (const event of secretEvents) expect(event.details).toMatchObject({ from: MASKED, to: MASKED });
    expect(JSON.stringify(trail.body)).not.toContain('clear-');
  });
});

describe('application settings: a secret the instance key cannot open', () => {
  it('reads as unset instead of failing every read of the settings', async () => {
    await app.deps.db
      .insertInto('application_settings')
      .values({
        key: 'akismet_api_key',
        value: JSON.stringify({ sealed: 'v1.AAAA.BBBB.CCCC' }),
        updated_at: new Date(),
      })
      .execute();
    const res = await app.request('/application/settings', { token: adminToken });
    expect(res.status).toBe(200);
    expect(res.body.akismet_api_key).toBeNull();
  });
});

describe('plan limits', () => {
  it('reads and changes the limits of a plan, refusing unknown plans and negative sizes', async () => {
    const defaults = await app.request('/application/plan_limits', { token: adminToken });
    expect(defaults).toMatchObject({
      status: 200,
      body: {
        conan_max_file_size: 3221225472,
        generic_packages_max_file_size: 5368709120,
        helm_max_file_size: 5242880,
        maven_max_file_size: 3221225472,
        npm_max_file_size: 524288000,
        nuget_max_file_size: 524288000,
        pypi_max_file_size: 3221225472,
        terraform_module_max_file_size: 1073741824,
      },
    });
    const change = await app.request('/application/plan_limits', {
      method: 'PUT',
      token: adminToken,
      query: { plan_name: 'premium', npm_max_file_size: 1000, helm_max_file_size: 0 },
    });
    expect(change).toMatchObject({ status: 200, body: { npm_max_file_size: 1000, helm_max_file_size: 0 } });
    expect(
      (await app.request('/application/plan_limits', { token: adminToken, query: { plan_name: 'premium' } })).body,
    ).toMatchObject({ npm_max_file_size: 1000, helm_max_file_size: 0, maven_max_file_size: 3221225472 });
    expect((await app.request('/application/plan_limits', { token: adminToken })).body.npm_max_file_size).toBe(
      524288000,
    );
    expect(
      await app.request('/application/plan_limits', { token: adminToken, query: { plan_name: 'platinum' } }),
    ).toMatchObject({ status: 400, body: { error: 'plan_name does not have a valid value' } });
    expect(
      await app.request('/application/plan_limits', {
        method: 'PUT',
        token: adminToken,
        body: { npm_max_file_size: 1 },
      }),
    ).toMatchObject({ status: 400, body: { error: 'plan_name is missing' } });
    expect(
      await app.request('/application/plan_limits', {
        method: 'PUT',
        token: adminToken,
        body: { plan_name: 'free', npm_max_file_size: -1, pypi_max_file_size: 5 },
      }),
    ).toMatchObject({ status: 400, body: { message: { npm_max_file_size: ['must be greater than or equal to 0'] } } });
    expect(
      (await app.request('/application/plan_limits', { token: adminToken, query: { plan_name: 'free' } })).body
        .pypi_max_file_size,
    ).toBe(3221225472);
  });
});

describe('the audit trail', () => {
  it('records who changed which attribute from what to what, newest first, paginated', async () => {
    app.clock.advance(60_000);
    const before = app.clock.now().toISOString();
    expect((await put({ default_branch_name: 'trunk', session_expire_delay: 60 })).status).toBe(200);
    const res = await app.request('/audit_events', {
      token: adminToken,
      query: { per_page: 2, created_after: before, entity_type: 'Gitlab::Audit::InstanceScope' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-per-page')).toBe('2');
    expect(res.headers.get('x-page')).toBe('1');
    expect(Number(res.headers.get('x-total'))).toBeGreaterThanOrEqual(2);
    expect(res.headers.get('link')).toContain('rel="first"');
    const changes = res.body.map((e: { details: { change: string } }) => e.details.change);
    expect(changes).toEqual(['session_expire_delay', 'default_branch_name']);
    const [event] = res.body;
    expect(event).toMatchObject({
      id: expect.any(Number),
      author_id: adminId,
      entity_id: 1,
      entity_type: 'Gitlab::Audit::InstanceScope',
      event_name: 'application_setting_updated',
      details: {
        change: 'session_expire_delay',
        from: 10080,
        to: 60,
        author_name: 'Ada Admin',
        target_type: 'ApplicationSetting',
        target_id: 1,
      },
      created_at: expect.stringMatching(/Z$/),
    });
    const one = await app.request(`/audit_events/${event.id}`, { token: adminToken });
    expect(one).toMatchObject({ status: 200, body: event });
    expect(await app.request('/audit_events/999999', { token: adminToken })).toMatchObject({
      status: 404,
      body: { message: '404 Audit Event Not Found' },
    });
    // Unchanged values record nothing.
    const total = res.headers.get('x-total');
    expect((await put({ default_branch_name: 'trunk' })).status).toBe(200);
    expect((await put({ repository_storages_weighted: { default: 100 } })).status).toBe(200);
    const again = await app.request('/audit_events', {
      token: adminToken,
      query: { per_page: 2, created_after: before, entity_type: 'Gitlab::Audit::InstanceScope' },
    });
    expect(again.headers.get('x-total')).toBe(total);
  });

  it('records plan limit changes with the plan', async () => {
    await app.request('/application/plan_limits', {
      method: 'PUT',
      token: adminToken,
      body: { plan_name: 'ultimate', maven_max_file_size: 12345 },
    });
    const [event] = (await app.request('/audit_events', { token: adminToken, query: { per_page: 1 } })).body;
    expect(event).toMatchObject({
      event_name: 'plan_limits_updated',
      details: { change: 'maven_max_file_size', from: 3221225472, to: 12345, target_id: 'ultimate' },
    });
  });
});

describe('a GitLab client library (@gitbeaker/rest)', () => {
  it('reads and edits settings and plan limits, and lists the audit trail', async () => {
    const gitlab = new Gitlab({ host: app.baseUrl, token: adminToken });
    const settings = await gitlab.ApplicationSettings.show();
    expect(settings).toMatchObject({ id: 1, default_branch_protection: 2 });
    const edited = await gitlab.ApplicationSettings.edit({
      defaultProjectVisibility: 'internal',
      maxAttachmentSize: 30,
      domainDenylistEnabled: true,
      domainDenylist: ['spam.example.com'],
    });
    expect(edited).toMatchObject({
      default_project_visibility: 'internal',
      max_attachment_size: 30,
      domain_denylist_enabled: true,
      domain_denylist: ['spam.example.com'],
    });
    const limits = await gitlab.ApplicationPlanLimits.show({ planName: 'gold' });
    expect(limits).toMatchObject({ conan_max_file_size: 3221225472 });
    const changed = await gitlab.ApplicationPlanLimits.edit('gold', { conanMaxFileSize: 99 });
    expect(changed).toMatchObject({ conan_max_file_size: 99 });
    await expect(gitlab.ApplicationSettings.edit({ deletionAdjournedPeriod: 100 })).rejects.toThrow();
    const events = await gitlab.AuditEvents.all({ perPage: 5, maxPages: 1 });
    expect(events.length).toBeGreaterThan(0);
    expect(events[0]).toMatchObject({ event_name: 'plan_limits_updated' });
  });
});

describe('the settings cache', () => {
  it('hears of every change to a cached table: each one notifies depot_row_change', async () => {
    const { rows } = await sql<{ table: string }>`
      SELECT c.relname AS table FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
      JOIN pg_proc p ON p.oid = t.tgfoid WHERE p.proname = 'depot_notify_row_change'`.execute(app.deps.db);
    const notifying = rows.map((r) => r.table);
    for (const table of WATCHED_TABLES) expect(notifying, table).toContain(table);
    expect(WATCHED_TABLES).toEqual(expect.arrayContaining(['application_settings', 'plan_limits']));
  });

  it('serves every process the change at once: another process of the instance reads the new value', async () => {
    const peer = await startTestApp({ peer: app });
    try {
      expect((await peer.request('/application/settings', { token: adminToken })).body.default_branch_name).toBe(null);
      expect((await put({ default_branch_name: 'develop' })).status).toBe(200);
      let seen: string | undefined;
      for (let i = 0; i < 50 && seen !== 'develop'; i++) {
        seen = (await peer.request('/application/settings', { token: adminToken })).body.default_branch_name;
        if (seen !== 'develop') await new Promise((r) => setTimeout(r, 20));
      }
      expect(seen).toBe('develop');
    } finally {
      await peer.close();
    }
  });
});
