import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { MAX_LOGIN_ATTEMPTS, UNLOCK_IN_SECONDS } from '../../src/services/password-auth.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeProject, makeToken, makeUser } from '../support/factories.js';
import { oauthPost, type RegisteredApp, registerApp } from '../support/oauth.js';
import { WebClient } from '../support/web-client.js';

/**
 * Brute-force lockout of password authentication (GitLab = Devise :lockable, 10 attempts,
 * unlocked after 10 minutes), one counter per user for every place a password is checked.
 */
const PASSWORD = 'correct horse battery staple';
const LOCKED = 'Your account is locked.';
const GIT_DENIED = /^HTTP Basic: Access denied\. If a password was provided for Git authentication/;
/** Past the sign-in rate limit's one-minute window, well inside the lock. */
const RATE_WINDOW_MS = 61_000;

let app: TestApp;
let ropc: RegisteredApp;

beforeAll(async () => {
  app = await startTestApp();
  const adminToken = await makeToken(app, await makeAdmin(app));
  ropc = await registerApp(app, adminToken, { scopes: 'api' });
});
afterAll(async () => {
  await app?.close();
});

const lockState = (user: User) =>
  app.deps.db
    .selectFrom('users')
    .select(['failed_attempts', 'locked_at'])
    .where('id', '=', user.id)
    .executeTakeFirstOrThrow();

async function webSignIn(login: string, password: string) {
  return new WebClient(app).signIn(login, password);
}

function passwordGrant(username: string, password: string) {
  return oauthPost(
    app,
    '/oauth/token',
    { grant_type: 'password', username, password },
    { basic: [ropc.clientId, ropc.secret] },
  );
}

async function gitInfoRefs(fullPath: string, login: string, password: string) {
  const res = await fetch(new URL(`/${fullPath}.git/info/refs?service=git-upload-pack`, app.baseUrl), {
    headers: { Authorization: `Basic ${Buffer.from(`${login}:${password}`).toString('base64')}` },
  });
  return { status: res.status, text: await res.text() };
}

describe('password lockout', () => {
  it('locks the web sign-in after ten wrong passwords, refuses the right one while locked, unlocks after ten minutes', async () => {
    const user = await makeUser(app, { password: PASSWORD });
    for (let i = 1; i <= MAX_LOGIN_ATTEMPTS; i++) {
      const wrong = await webSignIn(user.username, `guess ${i}`);
      expect(wrong.status).toBe(401);
      expect(wrong.text).toContain('Invalid login or password.');
      expect((await lockState(user)).failed_attempts).toBe(i);
    }
    const locked = await lockState(user);
    expect(locked.locked_at?.toISOString()).toBe(app.clock.now().toISOString());

    app.clock.advance(RATE_WINDOW_MS);
    const refused = await webSignIn(user.username, PASSWORD);
    expect(refused.status).toBe(401);
    expect(refused.text).toContain(LOCKED);
    expect(refused.location).toBeNull();
    // A locked account answers the same whatever the password: no oracle for the guesser.
    const guess = await webSignIn(user.username, 'yet another guess');
    expect(guess.status).toBe(401);
    expect(guess.text).toContain(LOCKED);

    // One second before the unlock period ends it is still locked; then the password works again.
    app.clock.set(new Date((locked.locked_at as Date).getTime() + UNLOCK_IN_SECONDS * 1000 - 1000));
    expect((await webSignIn(user.username, PASSWORD)).text).toContain(LOCKED);
    app.clock.advance(1000);
    const back = await webSignIn(user.username, PASSWORD);
    expect(back.status).toBe(303);
    expect(await lockState(user)).toEqual({ failed_attempts: 0, locked_at: null });
  });

  it('resets the count on success, and starts again at one after a lock ran out', async () => {
    const user = await makeUser(app, { password: PASSWORD });
    for (let i = 0; i < MAX_LOGIN_ATTEMPTS - 1; i++) await webSignIn(user.username, `guess ${i}`);
    expect((await lockState(user)).failed_attempts).toBe(MAX_LOGIN_ATTEMPTS - 1);
    expect((await webSignIn(user.username, PASSWORD)).status).toBe(303);
    expect((await lockState(user)).failed_attempts).toBe(0);
    app.clock.advance(RATE_WINDOW_MS);
    for (let i = 0; i < MAX_LOGIN_ATTEMPTS - 1; i++) await webSignIn(user.username, `again ${i}`);
    app.clock.advance(RATE_WINDOW_MS);
    expect((await webSignIn(user.username, PASSWORD)).status).toBe(303);

    // Lock it, let the lock run out, then one wrong password counts as the first of a new series.
    app.clock.advance(RATE_WINDOW_MS);
    for (let i = 0; i < MAX_LOGIN_ATTEMPTS; i++) await webSignIn(user.username, `lock ${i}`);
    expect((await lockState(user)).locked_at).not.toBeNull();
    app.clock.advance(UNLOCK_IN_SECONDS * 1000);
    const wrong = await webSignIn(user.username, 'after the lock');
    expect(wrong.text).toContain('Invalid login or password.');
    expect(await lockState(user)).toEqual({ failed_attempts: 1, locked_at: null });
  });

  it('counts the password grant, the sign-in page and Git over HTTP on one counter', async () => {
    const user = await makeUser(app, { password: PASSWORD });
    const project = await makeProject(app, user);
    const token = await makeToken(app, user, ['api']);
    for (let i = 0; i < 4; i++) await webSignIn(user.username, `web ${i}`);
    for (let i = 0; i < 3; i++) {
      const res = await passwordGrant(user.username, `grant ${i}`);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('invalid_grant');
    }
    for (let i = 0; i < 2; i++) {
      const res = await gitInfoRefs(project.full_path, user.username, `git ${i}`);
      expect(res.status).toBe(401);
      expect(res.text).toMatch(GIT_DENIED);
    }
    expect(await lockState(user)).toEqual({ failed_attempts: 9, locked_at: null });
    // The tenth wrong password locks the account, wherever it was sent.
    expect((await gitInfoRefs(project.full_path, user.username, 'git last')).status).toBe(401);
    expect((await lockState(user)).locked_at).not.toBeNull();
    app.clock.advance(RATE_WINDOW_MS);

    // Locked: the right password is refused by every door, each with its own answer.
    expect((await webSignIn(user.username, PASSWORD)).text).toContain(LOCKED);
    const grant = await passwordGrant(user.username, PASSWORD);
    expect(grant.status).toBe(400);
    expect(grant.body.error).toBe('invalid_grant');
    const git = await gitInfoRefs(project.full_path, user.username, PASSWORD);
    expect(git.status).toBe(401);
    expect(git.text).toMatch(GIT_DENIED);
    // GitLab's Git token checks need a user who may log in: the PAT is refused for Git too...
    expect((await gitInfoRefs(project.full_path, user.username, token)).status).toBe(401);
    // ...while the API goes on accepting it (access_locked prevents log_in, not access_api).
    const api = await app.request('/user', { token });
    expect(api.status).toBe(200);
    expect(api.body.username).toBe(user.username);
    // The refusals while locked did not count.
    expect((await lockState(user)).failed_attempts).toBe(MAX_LOGIN_ATTEMPTS);

    app.clock.advance(UNLOCK_IN_SECONDS * 1000);
    expect((await gitInfoRefs(project.full_path, user.username, PASSWORD)).status).toBe(200);
    expect(await lockState(user)).toEqual({ failed_attempts: 0, locked_at: null });
    expect((await passwordGrant(user.username, PASSWORD)).status).toBe(200);
    expect((await gitInfoRefs(project.full_path, user.username, token)).status).toBe(200);
  });

  it('does not count a Git password that is a known token (expired, revoked or under-scoped)', async () => {
    const user = await makeUser(app, { password: PASSWORD });
    const project = await makeProject(app, user);
    const expired = await makeToken(app, user, ['api'], { name: 'expired' });
    const revoked = await makeToken(app, user, ['api'], { name: 'revoked' });
    const readUser = await makeToken(app, user, ['read_user']);
    const tokens = app.deps.db.updateTable('personal_access_tokens').where('user_id', '=', user.id);
    await tokens.set({ expires_at: '2000-01-01' }).where('name', '=', 'expired').execute();
    await tokens.set({ revoked: true }).where('name', '=', 'revoked').execute();
    const known = [expired, revoked, readUser];
    for (let i = 0; i < MAX_LOGIN_ATTEMPTS + 2; i++) {
      expect((await gitInfoRefs(project.full_path, user.username, known[i % 3] as string)).status).toBe(401);
    }
    expect(await lockState(user)).toEqual({ failed_attempts: 0, locked_at: null });
    // An unknown value is a wrong password.
    expect((await gitInfoRefs(project.full_path, user.username, 'glpat-not-a-real-token')).status).toBe(401);
    expect((await lockState(user)).failed_attempts).toBe(1);
  });

  it('counts every one of concurrent wrong guesses and locks at the tenth', async () => {
    const user = await makeUser(app, { password: PASSWORD });
    const project = await makeProject(app, user);
    const answers = await Promise.all(
      Array.from({ length: MAX_LOGIN_ATTEMPTS }, (_, i) => gitInfoRefs(project.full_path, user.username, `race ${i}`)),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(MAX_LOGIN_ATTEMPTS).fill(401));
    const state = await lockState(user);
    expect(state.failed_attempts).toBe(MAX_LOGIN_ATTEMPTS);
    expect(state.locked_at).not.toBeNull();
    expect((await gitInfoRefs(project.full_path, user.username, PASSWORD)).status).toBe(401);
  });

  it('does not count attempts for unknown logins or blocked users', async () => {
    const blocked = await makeUser(app, { password: PASSWORD });
    await app.deps.db.updateTable('users').set({ state: 'blocked' }).where('id', '=', blocked.id).execute();
    for (let i = 0; i < 3; i++) await webSignIn(blocked.username, `guess ${i}`);
    expect(await lockState(blocked)).toEqual({ failed_attempts: 0, locked_at: null });
    const unknown = await webSignIn('nobody-by-this-name', PASSWORD);
    expect(unknown.status).toBe(401);
    expect(unknown.text).toContain('Invalid login or password.');
  });
});
