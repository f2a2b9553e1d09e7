import type Router from '@koa/router';
import { findUserById } from '../db/queries/users.js';
import type { AppContext, AppState } from '../http/context.js';
import {
  type AuthorizationRequest,
  approveAuthorization,
  errorRedirect,
  OAuthError,
  type PreAuthorization,
  preAuthorize,
  type RequestParams,
} from '../services/oauth.js';
import { SCOPE_DESCRIPTIONS } from '../services/oauth-applications.js';
import { field, formBody, parseForm, queryParams, toRequestParams } from './forms.js';
import { errorAlert, html, sendPage } from './html.js';
import { type BrowserSession, currentSession, rememberReturnTo, validCsrf } from './session.js';

/** The parameters the consent form carries back, unchanged, to the POST. */
const CARRIED = [
  'client_id',
  'redirect_uri',
  'response_type',
  'scope',
  'state',
  'code_challenge',
  'code_challenge_method',
];

/** The `form-action` source the consent form's redirect needs: the client's origin, or its scheme. */
function redirectSource(uri: string): string | undefined {
  try {
    const url = new URL(uri);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : url.protocol;
  } catch {
    return undefined;
  }
}

/** Who is shown where the person will be sent: host for web URIs, the whole URI otherwise. */
function redirectLabel(uri: string): string {
  try {
    const url = new URL(uri);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.host : uri;
  } catch {
    return uri;
  }
}

/** A request that cannot be sent back to the client: shown to the person, never redirected. */
function renderFatal(ctx: AppContext, error: OAuthError, browser: BrowserSession | null, status = 400): void {
  sendPage(
    ctx,
    {
      title: 'Authorization error',
      status,
      username: browser?.user?.username,
      csrfToken: browser?.session.csrf_token,
    },
    html`<div class="card">
<h1>An error has occurred</h1>
${errorAlert(error.description)}
<p>Error code: <code>${error.code}</code></p>
<p>The application that sent you here made a request Depot cannot accept. You can close this page.</p>
</div>`,
  );
}

async function renderConsent(
  ctx: AppContext,
  request: AuthorizationRequest,
  browser: BrowserSession,
  raw: RequestParams,
) {
  const app = request.application;
  const owner = app.owner_id === null ? undefined : await findUserById(ctx.state.deps.db, app.owner_id);
  const hidden = CARRIED.flatMap((name) => {
    const value = raw.get(name)?.[0];
    return value === undefined ? [] : [html`<input type="hidden" name="${name}" value="${value}">`];
  });
  const source = redirectSource(request.redirectUri);
  sendPage(
    ctx,
    {
      title: `Authorize ${app.name}`,
      username: browser.user?.username,
      csrfToken: browser.session.csrf_token,
      formActions: source ? [source] : [],
    },
    html`<div class="card">
<h1>Authorize <strong>${app.name}</strong> to use your account?</h1>
<p>An application called <strong>${app.name}</strong> is requesting access to your Depot account
<strong>@${browser.user?.username ?? ''}</strong>.
${owner ? html`It was registered by <strong>@${owner.username}</strong>.` : 'It was registered by an administrator of this Depot.'}
Only authorize applications you trust.</p>
<h2 id="scopes-heading">This application will be able to:</h2>
<ul class="scopes" aria-labelledby="scopes-heading">
${request.scopes.map((scope) => html`<li><strong>${scope}</strong><span>${SCOPE_DESCRIPTIONS[scope] ?? ''}</span></li>`)}
</ul>
<p>After you decide, you will be sent to <code>${redirectLabel(request.redirectUri)}</code>.</p>
<form method="post" action="/oauth/authorize">
<input type="hidden" name="authenticity_token" value="${browser.session.csrf_token}">
${hidden}
<div class="actions">
<button type="submit" class="primary" name="decision" value="approve">Authorize ${app.name}</button>
<button type="submit" class="secondary" name="decision" value="deny">Deny</button>
</div>
</form>
</div>`,
  );
}

/**
 * A redirect back to the client. It may carry a code: not cached, and no Referer from Depot's
 * pages goes along with it (Fetch applies a redirect's Referrer-Policy to the next request).
 */
function redirectToClient(ctx: AppContext, location: string): void {
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.status = 302;
  ctx.redirect(location);
}

/** Sends the checked request on: an error page, an error redirect, or nothing (valid). */
function handlePreAuthorization(ctx: AppContext, pre: PreAuthorization, browser: BrowserSession | null): boolean {
  if (pre.kind === 'fatal') {
    renderFatal(ctx, pre.error, browser);
    return true;
  }
  if (pre.kind === 'redirect') {
    redirectToClient(ctx, errorRedirect(ctx.state.deps, pre.redirectUri, pre.error, pre.state));
    return true;
  }
  return false;
}

/** `/oauth/authorize`: the consent page (GET) and the person's decision (POST). */
export function registerAuthorizePages(router: Router<AppState>): void {
  router.get('/oauth/authorize', async (ctx) => {
    const raw = queryParams(ctx.querystring);
    const pre = await preAuthorize(ctx.state.deps, raw);
    const browser = await currentSession(ctx);
    if (handlePreAuthorization(ctx, pre, browser) || pre.kind !== 'valid') return;
    if (!browser?.user) {
      await rememberReturnTo(ctx, ctx.originalUrl);
      ctx.status = 302;
      ctx.redirect('/users/sign_in');
      return;
    }
    await renderConsent(ctx, pre.request, browser, raw);
  });

  router.post('/oauth/authorize', parseForm, async (ctx) => {
    const form = formBody(ctx);
    const browser = await currentSession(ctx);
    if (!browser?.user) {
      ctx.status = 303;
      ctx.redirect('/users/sign_in');
      return;
    }
    if (!validCsrf(browser, field(form, 'authenticity_token'))) {
      renderFatal(
        ctx,
        new OAuthError(
          'invalid_request',
          'The form has expired or was not sent from this site. Start again from the application.',
        ),
        browser,
        422,
      );
      return;
    }
    const raw = toRequestParams(form);
    raw.delete('authenticity_token');
    raw.delete('decision');
    const pre = await preAuthorize(ctx.state.deps, raw);
    if (handlePreAuthorization(ctx, pre, browser) || pre.kind !== 'valid') return;
    const decision = field(form, 'decision');
    const location =
      decision === 'approve'
        ? await approveAuthorization(ctx.state.deps, pre.request, browser.user)
        : errorRedirect(ctx.state.deps, pre.request.redirectUri, new OAuthError('access_denied'), pre.request.state);
    redirectToClient(ctx, location);
  });
}
