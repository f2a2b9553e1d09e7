import { createHash } from 'node:crypto';
import type { AppContext } from '../http/context.js';

/** Escapes text for HTML element content and double-quoted attribute values. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Marks a string as already-safe HTML. */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

/** A tagged template that escapes every interpolated value unless it is Html (or a list of Html). */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    const parts = Array.isArray(value) ? value : [value];
    for (const part of parts) {
      if (part instanceof Html) out += part.value;
      else if (part !== undefined && part !== null && part !== false) out += escapeHtml(String(part));
    }
    out += strings[i + 1] ?? '';
  });
  return new Html(out);
}

/** One stylesheet, inline, allowed by its hash: the pages load nothing from anywhere else. */
const STYLE = `
:root { color-scheme: light; --fg: #1f1e24; --muted: #535158; --line: #d0cfd4; --accent: #1f5fbf; --danger: #ae1800; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", Arial, sans-serif; color: var(--fg); background: #fbfafd; }
header { display: flex; align-items: center; justify-content: space-between; gap: 1rem; padding: .75rem 1.5rem; background: #2b2838; color: #fff; }
header .brand { font-weight: 700; color: #fff; text-decoration: none; font-size: 1.1rem; }
header form { margin: 0; display: flex; align-items: center; gap: .75rem; }
header .who { color: #e4e2ea; }
main { max-width: 52rem; margin: 2rem auto; padding: 0 1.5rem; }
.card { background: #fff; border: 1px solid var(--line); border-radius: .5rem; padding: 1.5rem; margin-bottom: 1.5rem; }
h1 { font-size: 1.5rem; line-height: 1.3; margin: 0 0 1rem; }
h2 { font-size: 1.15rem; margin: 1.5rem 0 .5rem; }
.card > h2:first-child { margin-top: 0; }
dt { font-weight: 600; margin: 1rem 0 .25rem; }
dd { margin: 0; }
p { margin: 0 0 1rem; }
label { display: block; font-weight: 600; margin: 1rem 0 .25rem; }
input[type=text], input[type=password], textarea { width: 100%; padding: .5rem .65rem; font: inherit; border: 1px solid #89888d; border-radius: .25rem; background: #fff; color: var(--fg); }
textarea { min-height: 4.5rem; }
fieldset { border: 1px solid var(--line); border-radius: .25rem; margin: 1rem 0; padding: .5rem 1rem 1rem; }
legend { font-weight: 600; padding: 0 .25rem; }
.check { display: flex; gap: .5rem; align-items: flex-start; font-weight: 400; margin: .5rem 0; }
.check input { margin-top: .3rem; }
.hint { color: var(--muted); font-size: .9rem; margin: .25rem 0 0; }
button { font: inherit; font-weight: 600; padding: .5rem 1.1rem; border-radius: .25rem; border: 1px solid transparent; cursor: pointer; }
button.primary { background: var(--accent); color: #fff; }
button.secondary { background: #fff; color: var(--fg); border-color: #89888d; }
button.danger { background: #fff; color: var(--danger); border-color: var(--danger); }
header button { background: transparent; color: #fff; border-color: #8f8b9e; padding: .25rem .75rem; }
button:focus-visible, input:focus-visible, textarea:focus-visible, a:focus-visible { outline: 3px solid #fc9403; outline-offset: 2px; }
.actions { display: flex; gap: .75rem; margin-top: 1.5rem; flex-wrap: wrap; }
.scopes { list-style: none; padding: 0; margin: 0 0 1rem; border-bottom: 1px solid var(--line); }
.scopes li { padding: .6rem 0; border-top: 1px solid var(--line); }
.scopes li:first-child { border-top: 0; }
.scopes strong { display: block; }
.scopes span { color: var(--muted); }
.alert { border-radius: .25rem; padding: .75rem 1rem; margin-bottom: 1rem; border: 1px solid; }
.alert.error { background: #fdf1ef; border-color: var(--danger); color: #8d1300; }
.alert.notice { background: #f1f8f2; border-color: #217645; color: #14532d; }
code, .secret { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .92rem; overflow-wrap: anywhere; }
.secret { display: block; background: #f4f3f7; border: 1px solid var(--line); padding: .5rem .65rem; border-radius: .25rem; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: .5rem; border-top: 1px solid var(--line); vertical-align: top; }
th { font-size: .9rem; color: var(--muted); }
td form { margin: 0; }
`;

const STYLE_HASH = `'sha256-${createHash('sha256').update(STYLE, 'utf8').digest('base64')}'`;

export interface PageOptions {
  title: string;
  /** The signed-in user's username, for the header. */
  username?: string;
  /** The session's CSRF token (for the sign-out form). */
  csrfToken?: string;
  status?: number;
  /** Extra `form-action` sources: the consent form redirects to the client. */
  formActions?: string[];
}

/** Sends a complete page with the security headers every web page carries. */
export function sendPage(ctx: AppContext, options: PageOptions, body: Html): void {
  const signOut =
    options.username && options.csrfToken
      ? html`<form method="post" action="/users/sign_out">
          <span class="who">Signed in as <strong>@${options.username}</strong></span>
          <input type="hidden" name="authenticity_token" value="${options.csrfToken}">
          <button type="submit">Sign out</button>
        </form>`
      : html``;
  const page = html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${options.title} · Depot</title>
<style>${new Html(STYLE)}</style>
</head>
<body>
<header><a class="brand" href="/profile/applications">Depot</a>${signOut}</header>
<main id="content">
${body}
</main>
</body>
</html>
`;
  const formAction = ["'self'", ...(options.formActions ?? [])].join(' ');
  ctx.status = options.status ?? 200;
  ctx.type = 'text/html; charset=utf-8';
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Pragma', 'no-cache');
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set(
    'Content-Security-Policy',
    `default-src 'none'; style-src ${STYLE_HASH}; img-src 'self'; form-action ${formAction}; ` +
      "frame-ancestors 'none'; base-uri 'none'",
  );
  ctx.body = page.value;
}

/** An error message people can read, announced by screen readers. */
export const errorAlert = (message: string) => html`<div class="alert error" role="alert">${message}</div>`;
