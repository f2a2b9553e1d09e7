import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OAUTH_PRUNE_SCHEDULE, oauthPruneJob, scheduleOauthJobs } from '../../src/jobs/oauth.js';
import { nextDailyRun } from '../../src/jobs/recurring.js';
import { Worker } from '../../src/jobs/worker.js';
import { digestToken } from '../../src/lib/crypto.js';
import { CODE_TTL_SECONDS } from '../../src/services/oauth.js';
import { REVOKED_TOKEN_RETENTION_DAYS } from '../../src/services/oauth-pruning.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken, makeUser } from '../support/factories.js';
import { codeFor, exchange, oauthPost, type RegisteredApp, registerApp } from '../support/oauth.js';
import { WebClient } from '../support/web-client.js';

/** The daily job that deletes expired OAuth codes and revoked tokens nothing needs any more. */
const PASSWORD = 'correct horse battery staple';
const DAY_MS = 24 * 60 * 60 * 1000;

let app: TestApp;
let client: RegisteredApp;
let username: string;
let browser: WebClient;

beforeAll(async () => {
  app = await startTestApp();
  const adminToken = await makeToken(app, await makeAdmin(app));
  client = await registerApp(app, adminToken, { scopes: 'api' });
  username = (await makeUser(app, { password: PASSWORD })).username;
  browser = new WebClient(app);
  expect((await browser.signIn(username, PASSWORD)).status).toBe(303);
});
afterAll(async () => {
  await app?.close();
});

const credentials = () => ({ client_id: client.clientId, client_secret: client.secret });
const passwordGrant = () =>
  oauthPost(app, '/oauth/token', { grant_type: 'password', username, password: PASSWORD, ...credentials() });
const refresh = (refreshToken: string) =>
  oauthPost(app, '/oauth/token', { grant_type: 'refresh_token', refresh_token: refreshToken, ...credentials() });
const me = (accessToken: string) => app.request('/user', { headers: { Authorization: `Bearer ${accessToken}` } });

const tokenRow = (accessToken: string) =>
  app.deps.db
    .selectFrom('oauth_access_tokens')
    .select(['id', 'revoked_at'])
    .where('token_digest', '=', digestToken(accessToken))
    .executeTakeFirst();
const grantExists = async (code: string) =>
  (await app.deps.db
    .selectFrom('oauth_access_grants')
    .select('id')
    .where('code_digest', '=', digestToken(code))
    .executeTakeFirst()) !== undefined;

/** Makes the queued pruning job due and runs it through a worker, as the server would. */
async function runPruneJob(): Promise<void> {
  await app.deps.db
    .updateTable('jobs')
    .set({ run_at: new Date(Date.now() - 1000) })
    .where('kind', '=', OAUTH_PRUNE_SCHEDULE.kind)
    .where('state', '=', 'queued')
    .execute();
  expect(await new Worker(app.deps, [oauthPruneJob]).drain()).toBe(1);
}

describe('the OAuth pruning job', () => {
  it('schedules itself daily at 03:20 UTC, once', async () => {
    await scheduleOauthJobs(app.deps);
    await scheduleOauthJobs(app.deps);
    const queued = await app.deps.db
      .selectFrom('jobs')
      .select('run_at')
      .where('kind', '=', OAUTH_PRUNE_SCHEDULE.kind)
      .where('state', '=', 'queued')
      .execute();
    expect(queued).toHaveLength(1);
    const runAt = new Date(queued[0]?.run_at ?? 0);
    expect([runAt.getUTCHours(), runAt.getUTCMinutes(), runAt.getUTCSeconds()]).toEqual([3, 20, 0]);
    expect(runAt.getTime()).toBe(nextDailyRun(new Date(), 3, 20).getTime());
  });

  it('deletes expired codes and dead revoked tokens, keeps what replay detection and live clients need', async () => {
    const start = app.clock.now();
    // An authorization code that will expire unused, and one issued just before the job runs.
    const staleCode = await codeFor(browser, client);

    // A live family: rotated once, so its first token is revoked but still recognises a replay.
    const first = await passwordGrant();
    expect(first.status).toBe(200);
    const second = await refresh(first.body.refresh_token);
    expect(second.status).toBe(200);
    // A dead family: its only token revoked by the client.
    const revoked = await passwordGrant();
    expect((await oauthPost(app, '/oauth/revoke', { token: revoked.body.access_token, ...credentials() })).status).toBe(
      200,
    );
    // An expired access token never revoked: its refresh token must keep working.
    const idle = await passwordGrant();

    // Just inside the retention period nothing revoked goes; the expired code does.
    app.clock.set(new Date(start.getTime() + REVOKED_TOKEN_RETENTION_DAYS * DAY_MS - 60_000));
    await runPruneJob();
    expect(await grantExists(staleCode)).toBe(false);
    expect(await tokenRow(revoked.body.access_token)).toBeDefined();
    // The job queued tomorrow's run.
    const next = await app.deps.db
      .selectFrom('jobs')
      .select('run_at')
      .where('kind', '=', OAUTH_PRUNE_SCHEDULE.kind)
      .where('state', '=', 'queued')
      .executeTakeFirstOrThrow();
    expect(new Date(next.run_at).toISOString()).toBe(nextDailyRun(new Date(), 3, 20).toISOString());

    // Past the retention period: the dead family goes, the live family's rotated token stays.
    app.clock.set(new Date(start.getTime() + REVOKED_TOKEN_RETENTION_DAYS * DAY_MS + 60_000));
    expect((await browser.signIn(username, PASSWORD)).status).toBe(303);
    const freshCode = await codeFor(browser, client);
    await runPruneJob();
    expect(await tokenRow(revoked.body.access_token)).toBeUndefined();
    expect((await tokenRow(first.body.access_token))?.revoked_at).not.toBeNull();
    expect((await tokenRow(second.body.access_token))?.revoked_at).toBeNull();
    expect(await tokenRow(idle.body.access_token)).toBeDefined();
    expect(await grantExists(freshCode)).toBe(true);

    // The code issued before the run still works; the expired idle token still refreshes.
    expect((await exchange(app, client, freshCode)).status).toBe(200);
    const revived = await refresh(idle.body.refresh_token);
    expect(revived.status).toBe(200);
    expect((await me(revived.body.access_token)).status).toBe(200);

    // Replaying the rotated refresh token is still recognised and revokes its family.
    const replay = await refresh(first.body.refresh_token);
    expect(replay.status).toBe(400);
    expect(replay.body.error).toBe('invalid_grant');
    expect((await tokenRow(second.body.access_token))?.revoked_at).not.toBeNull();
    expect((await refresh(second.body.refresh_token)).status).toBe(400);

    // Now the family is dead: after the retention period its tokens go too.
    app.clock.advance(REVOKED_TOKEN_RETENTION_DAYS * DAY_MS + 60_000);
    await runPruneJob();
    expect(await tokenRow(first.body.access_token)).toBeUndefined();
    expect(await tokenRow(second.body.access_token)).toBeUndefined();
    expect(await tokenRow(revived.body.access_token)).toBeDefined();
  });

  it('lets a code live its full ten minutes', async () => {
    expect((await browser.signIn(username, PASSWORD)).status).toBe(303);
    const code = await codeFor(browser, client);
    app.clock.advance(CODE_TTL_SECONDS * 1000 - 1000);
    await runPruneJob();
    expect(await grantExists(code)).toBe(true);
    app.clock.advance(1000);
    await runPruneJob();
    expect(await grantExists(code)).toBe(false);
  });
});
