import type { TestApp } from './app.js';

export interface WebResponse {
  status: number;
  headers: Headers;
  text: string;
  /** The Location header, when the answer is a redirect. */
  location: string | null;
}

/**
 * A browser without JavaScript: keeps the session cookie, follows nothing by itself, and posts
 * forms as urlencoded bodies, as a plain HTML form does.
 */
export class WebClient {
  cookie: string | undefined;

  constructor(readonly app: TestApp) {}

  async request(path: string, init: { method?: string; form?: Record<string, string | string[]> } = {}) {
    const headers: Record<string, string> = {};
    if (this.cookie) headers.Cookie = this.cookie;
    let body: URLSearchParams | undefined;
    if (init.form) {
      body = new URLSearchParams();
      for (const [name, value] of Object.entries(init.form)) {
        for (const v of Array.isArray(value) ? value : [value]) body.append(name, v);
      }
    }
    const res = await fetch(new URL(path, this.app.baseUrl), {
      method: init.method ?? (init.form ? 'POST' : 'GET'),
      headers,
      body,
      redirect: 'manual',
    });
    for (const setCookie of res.headers.getSetCookie()) {
      const [pair] = setCookie.split(';');
      if (!pair) continue;
      const value = pair.slice(pair.indexOf('=') + 1);
      this.cookie = value === '' ? undefined : pair;
    }
    const response: WebResponse = {
      status: res.status,
      headers: res.headers,
      text: await res.text(),
      location: res.headers.get('Location'),
    };
    return response;
  }

  get(path: string) {
    return this.request(path);
  }

  post(path: string, form: Record<string, string | string[]>) {
    return this.request(path, { method: 'POST', form });
  }

  /** The CSRF token of the forms on a page. */
  static csrf(html: string): string {
    const match = /name="authenticity_token" value="([^"]+)"/.exec(html);
    if (!match?.[1]) throw new Error('no authenticity_token on the page');
    return match[1];
  }

  /** Signs in through the sign-in form; returns where the page sent the browser. */
  async signIn(login: string, password: string): Promise<WebResponse> {
    const page = await this.get('/users/sign_in');
    return this.post('/users/sign_in', {
      authenticity_token: WebClient.csrf(page.text),
      'user[login]': login,
      'user[password]': password,
    });
  }

  /** The CSRF token of the current (signed-in) session, read from a page's forms. */
  async csrfToken(): Promise<string> {
    const page = await this.get('/profile/applications');
    return WebClient.csrf(page.text);
  }
}
