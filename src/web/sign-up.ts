import type Router from '@koa/router';
import type { AppContext, AppState } from '../http/context.js';
import { ApiError } from '../http/errors.js';
import { SignUpDisabledError, type SignUpInput, signUp, signUpAllowed } from '../services/sign-up.js';
import { MIN_PASSWORD_LENGTH } from '../services/users.js';
import { field, formBody, parseForm } from './forms.js';
import { html, sendPage } from './html.js';
import { currentSession, ensureSession, signIn, validCsrf } from './session.js';
import { HOME_PATH } from './sign-in.js';

const PAGE = '/users/sign_up';

export const SIGN_UP_MESSAGES = {
  csrf: 'Your session expired or the form was sent twice. Please try again.',
  /** Devise's `signed_up_but_blocked_pending_approval`, as GitLab words it. */
  pendingApproval:
    'You have signed up successfully. However, we could not sign you in because your account is awaiting approval from your GitLab administrator.',
} as const;

/** GitLab's labels for full messages ("Email domain is not authorized for sign-up."). */
const FIELD_LABELS: Record<string, string> = {
  first_name: 'First name',
  last_name: 'Last name',
  username: 'Username',
  email: 'Email',
  password: 'Password',
  name: 'Name',
};

/** The full messages of a refused sign-up, or undefined when the error is not the form's. */
function formErrors(error: unknown): string[] | undefined {
  if (!(error instanceof ApiError)) return undefined;
  const message = error.body.message;
  if (error.status === 409 && typeof message === 'string') return [message];
  if (error.status !== 400 || !message || typeof message !== 'object') return undefined;
  return Object.entries(message as Record<string, string[]>).flatMap(([name, list]) =>
    list.map((m) => `${FIELD_LABELS[name] ?? name} ${m}`),
  );
}

async function renderSignUp(
  ctx: AppContext,
  options: { status?: number; errors?: string[]; input?: Partial<SignUpInput> } = {},
) {
  const browser = await ensureSession(ctx);
  const input = options.input ?? {};
  sendPage(
    ctx,
    { title: 'Register', status: options.status },
    html`<div class="card">
<h1>Register for Depot</h1>
${
  options.errors
    ? html`<div class="alert error" role="alert"><p>The form contains the following errors:</p><ul>${options.errors.map((e) => html`<li>${e}</li>`)}</ul></div>`
    : ''
}
<form method="post" action="${PAGE}">
<input type="hidden" name="authenticity_token" value="${browser.session.csrf_token}">
<label for="new_user_first_name">First name</label>
<input type="text" id="new_user_first_name" name="new_user[first_name]" value="${input.firstName ?? ''}" autocomplete="given-name" maxlength="127" required autofocus>
<label for="new_user_last_name">Last name</label>
<input type="text" id="new_user_last_name" name="new_user[last_name]" value="${input.lastName ?? ''}" autocomplete="family-name" maxlength="127" required>
<label for="new_user_username">Username</label>
<input type="text" id="new_user_username" name="new_user[username]" value="${input.username ?? ''}" autocomplete="username" autocapitalize="none" spellcheck="false" maxlength="255" required>
<label for="new_user_email">Email</label>
<input type="email" id="new_user_email" name="new_user[email]" value="${input.email ?? ''}" autocomplete="email" required>
<label for="new_user_password">Password</label>
<input type="password" id="new_user_password" name="new_user[password]" autocomplete="new-password" minlength="${String(MIN_PASSWORD_LENGTH)}" required aria-describedby="password_hint">
<p class="hint" id="password_hint">Minimum length is ${String(MIN_PASSWORD_LENGTH)} characters.</p>
<div class="actions"><button type="submit" class="primary">Register</button></div>
</form>
<p>Already have an account? <a href="/users/sign_in">Sign in</a></p>
</div>`,
  );
}

/**
 * `/users/sign_up`: self sign-up, while the settings allow it (GitLab's `allow_signup?`); when
 * they do not, both the page and the form lead to the sign-in page, as GitLab's registrations do.
 */
export function registerSignUpPages(router: Router<AppState>): void {
  router.get(PAGE, async (ctx) => {
    if ((await currentSession(ctx))?.user) {
      ctx.status = 302;
      ctx.redirect(HOME_PATH);
      return;
    }
    if (!(await signUpAllowed(ctx.state.deps))) {
      ctx.status = 302;
      ctx.redirect('/users/sign_in');
      return;
    }
    await renderSignUp(ctx);
  });

  router.post(PAGE, parseForm, async (ctx) => {
    const form = formBody(ctx);
    const input: SignUpInput = {
      firstName: field(form, 'new_user[first_name]'),
      lastName: field(form, 'new_user[last_name]'),
      username: field(form, 'new_user[username]'),
      email: field(form, 'new_user[email]'),
      password: field(form, 'new_user[password]'),
    };
    const browser = await currentSession(ctx);
    if (!validCsrf(browser, field(form, 'authenticity_token'))) {
      await renderSignUp(ctx, { status: 422, errors: [SIGN_UP_MESSAGES.csrf], input });
      return;
    }
    let user: Awaited<ReturnType<typeof signUp>>;
    try {
      user = await signUp(ctx.state.deps, input);
    } catch (error) {
      if (error instanceof SignUpDisabledError) {
        ctx.status = 303;
        ctx.redirect('/users/sign_in');
        return;
      }
      const errors = formErrors(error);
      if (!errors) throw error;
      await renderSignUp(ctx, { status: 422, errors, input });
      return;
    }
    if (user.state !== 'active') {
      sendPage(
        ctx,
        { title: 'Registered' },
        html`<div class="card" role="status"><h1>Thanks for registering</h1><div class="alert notice">${SIGN_UP_MESSAGES.pendingApproval}</div><p><a href="/users/sign_in">Sign in</a></p></div>`,
      );
      return;
    }
    await signIn(ctx, user);
    ctx.status = 303;
    ctx.redirect(HOME_PATH);
  });
}
