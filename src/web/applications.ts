import type Router from '@koa/router';
import { listOauthApplications } from '../db/queries/oauth.js';
import type { OauthApplication } from '../db/schema.js';
import type { AppContext, AppState } from '../http/context.js';
import { ApiError } from '../http/errors.js';
import { getApplicationSettings } from '../services/application-settings.js';
import {
  createOauthApplication,
  deleteApplication,
  OAUTH_SCOPES,
  redirectUris,
  SCOPE_DESCRIPTIONS,
} from '../services/oauth-applications.js';
import { field, fieldList, formBody, parseForm } from './forms.js';
import { errorAlert, type Html, html, sendPage } from './html.js';
import { type BrowserSession, currentSession, rememberReturnTo, validCsrf } from './session.js';

const PAGE = '/profile/applications';
/** Shown instead of the form while `user_oauth_applications` is off for a non-administrator. */
export const USER_APPLICATIONS_OFF_MESSAGE = 'Registering OAuth applications is turned off by your administrator.';

/**
 * GitLab's `user_oauth_applications`: while off, users may only list their applications; adding
 * and deleting them is refused (administrators keep both, outside admin mode).
 */
async function mayManageApplications(ctx: AppContext, browser: BrowserSession): Promise<boolean> {
  const { values } = await getApplicationSettings(ctx.state.deps);
  // With `admin_mode` on, GitLab's web pages treat administrators as regular users until they
  // enter admin mode, which Depot's pages do not offer yet.
  if (browser.user?.admin && values.admin_mode !== true) return true;
  return values.user_oauth_applications !== false;
}

interface FormState {
  name?: string;
  redirectUri?: string;
  scopes?: string[];
  confidential?: boolean;
  errors?: string[];
}

/** GitLab's field names for validation messages ("Redirect URI must be an absolute URI."). */
const FIELD_LABELS: Record<string, string> = { name: 'Name', redirect_uri: 'Redirect URI', scopes: 'Scopes' };

function validationMessages(error: ApiError): string[] | undefined {
  const message = error.body.message;
  if (!message || typeof message !== 'object') return undefined;
  return Object.entries(message as Record<string, string[]>).flatMap(([name, list]) =>
    list.map((m) => `${FIELD_LABELS[name] ?? name} ${m}`),
  );
}

function applicationRow(app: OauthApplication, csrf: string, manage: boolean): Html {
  return html`<tr>
<td><strong>${app.name}</strong><br><span class="hint">${app.confidential ? 'Confidential' : 'Public'}</span></td>
<td><code>${app.uid}</code></td>
<td>${app.scopes.join(', ')}</td>
<td>${redirectUris(app).map((u) => html`<code>${u}</code><br>`)}</td>
<td>${
    manage
      ? html`<form method="post" action="${PAGE}/${String(app.id)}/delete">
<input type="hidden" name="authenticity_token" value="${csrf}">
<button type="submit" class="danger" aria-label="Delete ${app.name}">Delete</button>
</form>`
      : ''
  }</td>
</tr>`;
}

async function renderApplications(
  ctx: AppContext,
  browser: BrowserSession,
  options: { status?: number; form?: FormState; created?: { app: OauthApplication; secret: string } } = {},
): Promise<void> {
  const user = browser.user;
  if (!user) return;
  const csrf = browser.session.csrf_token;
  const apps = await listOauthApplications(ctx.state.deps.db, user.id);
  const form = options.form ?? {};
  const manage = await mayManageApplications(ctx, browser);
  const chosen = new Set(form.scopes ?? []);
  const confidential = form.confidential ?? true;
  const created = options.created
    ? html`<div class="card" role="status">
<h2>Application “${options.created.app.name}” was created</h2>
<div class="alert notice">Copy the secret now: this is the only time Depot shows it.</div>
<dl>
<dt>Application ID</dt>
<dd><code class="secret" id="created_uid">${options.created.app.uid}</code></dd>
<dt>Secret</dt>
<dd><code class="secret" id="created_secret">${options.created.secret}</code></dd>
</dl>
</div>`
    : '';
  sendPage(
    ctx,
    { title: 'Applications', status: options.status, username: user.username, csrfToken: csrf },
    html`<h1>Applications</h1>
${created}
<div class="card">
<h2>Your applications</h2>
${
  apps.length === 0
    ? html`<p>You have not registered any application yet.</p>`
    : html`<table>
<thead><tr><th scope="col">Name</th><th scope="col">Application ID</th><th scope="col">Scopes</th><th scope="col">Redirect URIs</th><th scope="col"><span class="hint">Actions</span></th></tr></thead>
<tbody>${apps.map((app) => applicationRow(app, csrf, manage))}</tbody>
</table>`
}
</div>
${
  manage
    ? html`<div class="card">
<h2>Add a new application</h2>
${form.errors ? html`<div class="alert error" role="alert"><ul>${form.errors.map((e) => html`<li>${e}</li>`)}</ul></div>` : ''}
<form method="post" action="${PAGE}">
<input type="hidden" name="authenticity_token" value="${csrf}">
<label for="app_name">Name</label>
<input type="text" id="app_name" name="name" value="${form.name ?? ''}" required maxlength="255">
<label for="app_redirect_uri">Redirect URI</label>
<textarea id="app_redirect_uri" name="redirect_uri" required aria-describedby="redirect_hint">${form.redirectUri ?? ''}</textarea>
<p class="hint" id="redirect_hint">One URI per line. It must match the client's redirect_uri exactly.</p>
<input type="hidden" name="confidential" value="0">
<label class="check"><input type="checkbox" name="confidential" value="1"${confidential ? html` checked` : ''}>
<span>Confidential<br><span class="hint">The application can keep its secret (a server). Leave unchecked for mobile and single-page applications, which must use PKCE.</span></span></label>
<fieldset>
<legend>Scopes</legend>
${OAUTH_SCOPES.map(
  (
    scope,
  ) => html`<label class="check"><input type="checkbox" name="scopes" value="${scope}"${chosen.has(scope) ? html` checked` : ''}>
<span><code>${scope}</code><br><span class="hint">${SCOPE_DESCRIPTIONS[scope] ?? ''}</span></span></label>`,
)}
</fieldset>
<div class="actions"><button type="submit" class="primary">Save application</button></div>
</form>
</div>`
    : html`<div class="card"><p class="hint" id="applications_off">${USER_APPLICATIONS_OFF_MESSAGE}</p></div>`
}`,
  );
}

/** The signed-in browser, or a redirect to the sign-in page that comes back here. */
async function requireSignedIn(ctx: AppContext): Promise<BrowserSession | null> {
  const browser = await currentSession(ctx);
  if (browser?.user) return browser;
  if (ctx.method === 'GET') await rememberReturnTo(ctx, PAGE);
  ctx.status = ctx.method === 'GET' ? 302 : 303;
  ctx.redirect('/users/sign_in');
  return null;
}

function renderCsrfFailure(ctx: AppContext, browser: BrowserSession) {
  return renderApplications(ctx, browser, {
    status: 422,
    form: { errors: ['The form has expired or was not sent from this site. Please try again.'] },
  });
}

/** GitLab redirects away from a refused create or delete; here, back to the list, with a 403. */
function refuseWhileOff(ctx: AppContext, browser: BrowserSession) {
  return renderApplications(ctx, browser, { status: 403 });
}

/** `/profile/applications`: users register, list and delete their OAuth applications. */
export function registerApplicationPages(router: Router<AppState>): void {
  router.get(PAGE, async (ctx) => {
    const browser = await requireSignedIn(ctx);
    if (browser) await renderApplications(ctx, browser);
  });

  router.post(PAGE, parseForm, async (ctx) => {
    const browser = await requireSignedIn(ctx);
    if (!browser?.user) return;
    const form = formBody(ctx);
    if (!validCsrf(browser, field(form, 'authenticity_token'))) return renderCsrfFailure(ctx, browser);
    if (!(await mayManageApplications(ctx, browser))) return refuseWhileOff(ctx, browser);
    const state: FormState = {
      name: field(form, 'name'),
      redirectUri: field(form, 'redirect_uri'),
      scopes: fieldList(form, 'scopes'),
      confidential: field(form, 'confidential') === '1',
    };
    try {
      const { application, secret } = await createOauthApplication(ctx.state.deps, browser.user, {
        name: state.name ?? '',
        redirectUri: state.redirectUri ?? '',
        scopes: state.scopes ?? [],
        confidential: state.confidential ?? true,
      });
      await renderApplications(ctx, browser, { status: 201, created: { app: application, secret } });
    } catch (error) {
      const errors = error instanceof ApiError ? validationMessages(error) : undefined;
      if (!errors) throw error;
      await renderApplications(ctx, browser, { status: 400, form: { ...state, errors } });
    }
  });

  router.post(`${PAGE}/:id/delete`, parseForm, async (ctx) => {
    const browser = await requireSignedIn(ctx);
    if (!browser?.user) return;
    if (!validCsrf(browser, field(formBody(ctx), 'authenticity_token'))) return renderCsrfFailure(ctx, browser);
    if (!(await mayManageApplications(ctx, browser))) return refuseWhileOff(ctx, browser);
    const id = /^\d{1,9}$/.test(ctx.params.id ?? '') ? Number(ctx.params.id) : 0;
    const deleted = await deleteApplication(ctx.state.deps, id, browser.user);
    if (!deleted) {
      sendPage(
        ctx,
        { title: 'Not found', status: 404, username: browser.user.username, csrfToken: browser.session.csrf_token },
        html`<div class="card"><h1>Application not found</h1>${errorAlert('There is no such application among yours.')}<p><a href="${PAGE}">Back to your applications</a></p></div>`,
      );
      return;
    }
    ctx.status = 303;
    ctx.redirect(PAGE);
  });
}
