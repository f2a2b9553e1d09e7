import type { Middleware } from 'koa';
import type { AppContext, AppState } from '../http/context.js';
import { loadProjectPolicy } from '../policies/abilities.js';
import { type ErrorWithLatest, findErrorTrackingSetting, listProjectErrors } from '../services/error-tracking.js';
import { findProjectAndNamespace } from '../services/projects.js';
import { type Html, html, sendPage } from './html.js';
import { currentSession, rememberReturnTo } from './session.js';

/** `/<full path>/-/error_tracking` (GitLab's Projects::ErrorTrackingController#index). */
const ROUTE = /^\/(.+?)\/-\/error_tracking\/?$/;

interface Frame {
  filename?: unknown;
  function?: unknown;
  lineno?: unknown;
  colno?: unknown;
  module?: unknown;
}

/** The latest event's stack trace, innermost frame first, as GitLab's page shows it. */
function stackTrace(event: Record<string, unknown> | null): Html {
  const values = (event?.exception as { values?: { stacktrace?: { frames?: Frame[] } }[] } | undefined)?.values ?? [];
  const frames = [...(values[0]?.stacktrace?.frames ?? [])].reverse();
  if (frames.length === 0) return html`<p class="hint">No stack trace.</p>`;
  const line = (frame: Frame) => {
    const where = [frame.filename ?? frame.module ?? '?', frame.lineno, frame.colno].filter((v) => v !== undefined);
    return html`<li><code>${String(frame.function ?? '?')}</code> <span class="hint">${where.join(':')}</span></li>`;
  };
  return html`<ol class="stack">${frames.map(line)}</ol>`;
}

function errorCard(error: ErrorWithLatest): Html {
  return html`<div class="card error-entry">
<h2><code class="error-name">${error.name}</code></h2>
<p class="error-description">${error.description}</p>
<dl>
<dt>Where</dt><dd><code>${error.actor}</code></dd>
<dt>Events</dt><dd class="error-count">${String(error.events_count)}</dd>
<dt>First seen</dt><dd><time datetime="${error.first_seen_at.toISOString()}">${error.first_seen_at.toISOString()}</time></dd>
<dt>Last seen</dt><dd><time datetime="${error.last_seen_at.toISOString()}">${error.last_seen_at.toISOString()}</time></dd>
</dl>
<h3>Latest stack trace</h3>
${stackTrace(error.latest)}
</div>`;
}

function notFound(ctx: AppContext): void {
  ctx.status = 404;
  ctx.type = 'text/plain';
  ctx.body = 'Not Found';
}

/** A project's errors, collected by the integrated error tracking, for its reporters and up. */
export function errorTrackingPage(): Middleware<AppState, AppContext> {
  return async (ctx, next) => {
    const match = ROUTE.exec(ctx.path);
    if (!match || (ctx.method !== 'GET' && ctx.method !== 'HEAD')) return next();
    const deps = ctx.state.deps;
    const found = await findProjectAndNamespace(deps, match[1] as string);
    const browser = await currentSession(ctx);
    const user = browser?.user ?? null;
    if (!user) {
      await rememberReturnTo(ctx, ctx.originalUrl);
      ctx.redirect('/users/sign_in');
      return;
    }
    if (!found) return notFound(ctx);
    const policy = await loadProjectPolicy(deps, user, found.project, found.namespace);
    if (!policy.can('read_error_tracking')) return notFound(ctx);
    const setting = await findErrorTrackingSetting(deps.db, found.project.id);
    const errors = await listProjectErrors(deps.db, found.project.id);
    const fullPath = match[1] as string;
    const state = !setting?.enabled
      ? html`<p class="hint" id="error_tracking_off">Error tracking is turned off for this project.</p>`
      : errors.length === 0
        ? html`<p class="hint" id="no_errors">No errors yet.</p>`
        : '';
    sendPage(
      ctx,
      { title: `Errors · ${fullPath}`, username: user.username, csrfToken: browser?.session.csrf_token },
      html`<h1>Errors of ${fullPath}</h1>
${state}
${errors.map(errorCard)}`,
    );
  };
}
