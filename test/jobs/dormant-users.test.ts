import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DORMANT_USERS_SCHEDULE, dormantUsersJob, scheduleDormantUsersJob } from '../../src/jobs/dormant-users.js';
import { nextDailyRun } from '../../src/jobs/recurring.js';
import { Worker } from '../../src/jobs/worker.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken, makeUser, makeUserWithToken } from '../support/factories.js';
import { WebClient } from '../support/web-client.js';

/** The daily job behind `deactivate_dormant_users`, run through a worker with a moved clock. */
const DAY_MS = 24 * 60 * 60 * 1000;

let app: TestApp;
let adminToken: string;

beforeAll(async () => {
  app = await startTestApp();
  adminToken = await makeToken(app, await makeAdmin(app));
});
afterAll(async () => {
  await app?.close();
});

const put = (body: Record<string, unknown>) =>
  app.request('/application/settings', { method: 'PUT', token: adminToken, body });
const stateOf = async (id: number) => (await app.request(`/users/${id}`, { token: adminToken })).body.state;

/** Queues the job if need be, makes it due and runs it through a worker, as the server would. */
async function runJob(): Promise<void> {
  await scheduleDormantUsersJob(app.deps);
  await app.deps.db
    .updateTable('jobs')
    .set({ run_at: new Date(Date.now() - 1000) })
    .where('kind', '=', DORMANT_USERS_SCHEDULE.kind)
    .where('state', '=', 'queued')
    .execute();
  expect(await new Worker(app.deps, [dormantUsersJob]).drain()).toBe(1);
}

describe('deactivate_dormant_users', () => {
  it('schedules itself daily at 00:21 UTC, once', async () => {
    await scheduleDormantUsersJob(app.deps);
    await scheduleDormantUsersJob(app.deps);
    const queued = await app.deps.db
      .selectFrom('jobs')
      .select('run_at')
      .where('kind', '=', DORMANT_USERS_SCHEDULE.kind)
      .where('state', '=', 'queued')
      .execute();
    expect(queued).toHaveLength(1);
    expect(new Date(queued[0]?.run_at ?? 0).getTime()).toBe(nextDailyRun(new Date(), 0, 21).getTime());
  });

  it("refuses a period under GitLab's 90 days while the switch is on", async () => {
    const res = await put({ deactivate_dormant_users: true, deactivate_dormant_users_period: 30 });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      message: { deactivate_dormant_users_period: ["'30' days of inactivity must be greater than or equal to 90"] },
    });
    const read = await app.request('/application/settings', { token: adminToken });
    expect(read.body).toMatchObject({ deactivate_dormant_users: false, deactivate_dormant_users_period: 90 });
  });

  it('deactivates users inactive for the period, never admins or bots, only while switched on', async () => {
    const start = app.clock.now();
    const secondAdmin = await makeAdmin(app);
    const bot = await makeUser(app, { bot: true });
    const neverActive = await makeUser(app);
    const stale = await makeUserWithToken(app);
    const fresh = await makeUserWithToken(app);
    // A request records the day of activity.
    expect((await app.request('/user', { token: stale.token })).status).toBe(200);
    const staleRow = await app.deps.db
      .selectFrom('users')
      .select('last_activity_on')
      .where('id', '=', stale.user.id)
      .executeTakeFirstOrThrow();
    expect(staleRow.last_activity_on).toBe(start.toISOString().slice(0, 10));

    app.clock.advance(100 * DAY_MS);
    expect((await app.request('/user', { token: fresh.token })).status).toBe(200);
    // Switched off (GitLab's default): nobody is touched.
    await runJob();
    expect(await stateOf(stale.user.id)).toBe('active');

    expect((await put({ deactivate_dormant_users: true, deactivate_dormant_users_period: 120 })).status).toBe(200);
    await runJob();
    expect(await stateOf(stale.user.id)).toBe('active'); // 100 days < 120
    expect(await stateOf(neverActive.id)).toBe('deactivated'); // never active, created over a week ago

    expect((await put({ deactivate_dormant_users_period: 90 })).status).toBe(200);
    await runJob();
    expect(await stateOf(stale.user.id)).toBe('deactivated');
    expect(await stateOf(fresh.user.id)).toBe('active');
    expect(await stateOf(secondAdmin.id)).toBe('active');
    expect(await stateOf(bot.id)).toBe('active');
    const refused = await app.request('/user', { token: stale.token });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(/^403 Forbidden - Your account has been deactivated by your administrator\./);
    // The job queued its next run.
    const next = await app.deps.db
      .selectFrom('jobs')
      .select('id')
      .where('kind', '=', DORMANT_USERS_SCHEDULE.kind)
      .where('state', '=', 'queued')
      .execute();
    expect(next).toHaveLength(1);
  });

  it('leaves a user created less than a week ago alone', async () => {
    expect((await put({ deactivate_dormant_users: true, deactivate_dormant_users_period: 90 })).status).toBe(200);
    const newcomer = await makeUser(app);
    app.clock.advance(6 * DAY_MS);
    await runJob();
    expect(await stateOf(newcomer.id)).toBe('active');
    app.clock.advance(DAY_MS);
    await runJob();
    expect(await stateOf(newcomer.id)).toBe('deactivated');
  });

  it('lets a deactivated user back in by signing in through the web, as GitLab does', async () => {
    expect((await put({ deactivate_dormant_users: true, deactivate_dormant_users_period: 90 })).status).toBe(200);
    const password = 'correct horse battery staple';
    const sleeper = await makeUserWithToken(app, { password });
    app.clock.advance(8 * DAY_MS);
    await runJob();
    expect(await stateOf(sleeper.user.id)).toBe('deactivated');
    expect((await app.request('/user', { token: sleeper.token })).status).toBe(403);
    const browser = new WebClient(app);
    expect((await browser.signIn(sleeper.user.username, 'wrong password')).status).toBe(401);
    expect(await stateOf(sleeper.user.id)).toBe('deactivated');
    expect((await browser.signIn(sleeper.user.username, password)).status).toBe(303);
    expect(await stateOf(sleeper.user.id)).toBe('active');
    expect((await app.request('/user', { token: sleeper.token })).status).toBe(200);
  });
});
