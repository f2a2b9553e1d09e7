import type Router from '@koa/router';
import { limitSignIn } from '../api/oauth.js';
import { findUserByEmail, findUserByIdOrUsername } from '../db/queries/users.js';
import type { AppContext, AppState } from '../http/context.js';
import { ApiError } from '../http/errors.js';
import { getApplicationSettings } from '../services/application-settings.js';
import { ACCOUNT_LOCKED_MESSAGE, checkUserPassword } from '../services/password-auth.js';
import { reactivateOnSignIn } from '../services/user-activity.js';
import { field, formBody, parseForm } from './forms.js';
import { errorAlert, html, sendPage } from './html.js';
import { currentSession, ensureSession, safeReturnPath, signIn, signOut, validCsrf } from './session.js';

/** Where people land after signing in when no page asked for it. */
export const HOME_PATH = '/profile/applications';

export const SIGN_IN_MESSAGES = {
  invalid: 'Invalid login or password.',
  locked: ACCOUNT_LOCKED_MESSAGE,
  twoFactor:
    'Your account uses two-factor authentication, which this sign-in page does not offer. ' +
    'Use a personal access token instead.',
  csrf: 'Your session expired or the form was sent twice. Please sign in again.',
  tooMany: 'Too many sign-in attempts. Wait a minute and try again.',
  /** GitLab's sign-in page when password sign-in is its only method and is turned off. */
  noMethods: 'No authentication methods configured.',
  passwordOff: 'Password sign-in is turned off on this instance.',
} as const;

/** The text of `sign_in_text`, one paragraph per blank-line-separated block (Depot renders no Markdown). */
function signInText(text: unknown) {
  if (typeof text !== 'string' || text.trim() === '') return '';
  const paragraphs = text.split(/\r?\n\s*\r?\n/).filter((p) => p.trim() !== '');
  return html`<div class="sign-in-text">${paragraphs.map((p) => html`<p>${p.trim()}</p>`)}</div>`;
}

async function renderSignIn(ctx: AppContext, options: { status?: number; error?: string; login?: string } = {}) {
  const browser = await ensureSession(ctx);
  const settings = (await getApplicationSettings(ctx.state.deps)).values;
  const passwordForm = settings.password_authentication_enabled_for_web !== false;
  const signUp = settings.signup_enabled !== false && passwordForm;
  sendPage(
    ctx,
    { title: 'Sign in', status: options.status },
    html`<div class="card">
<h1>Sign in to Depot</h1>
${signInText(settings.sign_in_text)}
${options.error ? errorAlert(options.error) : ''}
${
  passwordForm
    ? html`<form method="post" action="/users/sign_in">
<input type="hidden" name="authenticity_token" value="${browser.session.csrf_token}">
<label for="user_login">Username or primary email</label>
<input type="text" id="user_login" name="user[login]" value="${options.login ?? ''}" autocomplete="username" autocapitalize="none" spellcheck="false" required autofocus>
<label for="user_password">Password</label>
<input type="password" id="user_password" name="user[password]" autocomplete="current-password" required>
<div class="actions"><button type="submit" class="primary">Sign in</button></div>
</form>`
    : html`<p>${SIGN_IN_MESSAGES.noMethods}</p>`
}
${signUp ? html`<p>Don't have an account yet? <a href="/users/sign_up">Register now</a></p>` : ''}
</div>`,
  );
}

/** The user behind a login (username or email) and password, or the reason there is none. */
async function checkPassword(ctx: AppContext, login: string, password: string) {
  const db = ctx.state.deps.db;
  const user = login.includes('@') ? await findUserByEmail(db, login) : await findUserByIdOrUsername(db, login);
  const checked = await checkUserPassword(ctx.state.deps, user, password, { count: true, allowDeactivated: true });
  if (!checked.ok) return { error: checked.reason === 'locked' ? SIGN_IN_MESSAGES.locked : SIGN_IN_MESSAGES.invalid };
  if (checked.user.two_factor_enabled) return { error: SIGN_IN_MESSAGES.twoFactor };
  return { user: await reactivateOnSignIn(ctx.state.deps, checked.user) };
}

/** `/users/sign_in` (password sign-in, back to the page that asked) and `/users/sign_out`. */
export function registerSignInPages(router: Router<AppState>): void {
  // GitLab's root: signed in, the dashboard (here the applications page); signed out, the
  // instance's `home_page_url` when set, else the sign-in page.
  router.get('/', async (ctx) => {
    const browser = await currentSession(ctx);
    const homePageUrl = (await getApplicationSettings(ctx.state.deps)).values.home_page_url;
    ctx.status = 302;
    if (browser?.user) ctx.redirect(HOME_PATH);
    else if (typeof homePageUrl === 'string' && homePageUrl !== '') ctx.redirect(homePageUrl);
    else ctx.redirect('/users/sign_in');
  });

  router.get('/users/sign_in', async (ctx) => {
    const browser = await currentSession(ctx);
    if (browser?.user) {
      ctx.status = 302;
      ctx.redirect(safeReturnPath(browser.session.return_to) ?? HOME_PATH);
      return;
    }
    await renderSignIn(ctx);
  });

  router.post('/users/sign_in', parseForm, async (ctx) => {
    const form = formBody(ctx);
    const login = field(form, 'user[login]') || field(form, 'login');
    const password = field(form, 'user[password]') || field(form, 'password');
    const browser = await currentSession(ctx);
    if (!validCsrf(browser, field(form, 'authenticity_token'))) {
      await renderSignIn(ctx, { status: 422, error: SIGN_IN_MESSAGES.csrf, login });
      return;
    }
    // GitLab refuses a password sign-in with 403 while password authentication for the web is off.
    if (
      (login || password) &&
      (await getApplicationSettings(ctx.state.deps)).values.password_authentication_enabled_for_web === false
    ) {
      sendPage(
        ctx,
        { title: 'Forbidden', status: 403 },
        html`<div class="card"><h1>403: Forbidden</h1>${errorAlert(SIGN_IN_MESSAGES.passwordOff)}<p><a href="/users/sign_in">Back to sign-in</a></p></div>`,
      );
      return;
    }
    try {
      await limitSignIn(ctx, login);
    } catch (error) {
      if (error instanceof ApiError && error.status === 429) {
        ctx.set(error.headers);
        await renderSignIn(ctx, { status: 429, error: SIGN_IN_MESSAGES.tooMany, login });
        return;
      }
      throw error;
    }
    const result = await checkPassword(ctx, login, password);
    if (!result.user) {
      await renderSignIn(ctx, { status: 401, error: result.error, login });
      return;
    }
    const returnTo = safeReturnPath(browser?.session.return_to) ?? HOME_PATH;
    await signIn(ctx, result.user);
    ctx.status = 303;
    ctx.redirect(returnTo);
  });

  router.post('/users/sign_out', parseForm, async (ctx) => {
    const browser = await currentSession(ctx);
    if (!validCsrf(browser, field(formBody(ctx), 'authenticity_token'))) {
      await renderSignIn(ctx, { status: 422, error: SIGN_IN_MESSAGES.csrf });
      return;
    }
    await signOut(ctx);
    // GitLab's after_sign_out_path_for: the setting when present, else the sign-in page.
    const afterSignOut = (await getApplicationSettings(ctx.state.deps)).values.after_sign_out_path;
    ctx.status = 303;
    ctx.redirect(typeof afterSignOut === 'string' && afterSignOut !== '' ? afterSignOut : '/users/sign_in');
  });
}
