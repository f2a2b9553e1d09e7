import Router from '@koa/router';
import type { Middleware } from 'koa';
import type { AppState } from '../http/context.js';
import { registerApplicationPages } from './applications.js';
import { registerAuthorizePages } from './oauth-authorize.js';
import { registerSignInPages } from './sign-in.js';
import { registerSignUpPages } from './sign-up.js';

/** The server-rendered pages: sign-in, sign-up, OAuth consent and application registration. No JavaScript. */
export function webPages(): Middleware<AppState> {
  const router = new Router<AppState>();
  registerSignInPages(router);
  registerSignUpPages(router);
  registerAuthorizePages(router);
  registerApplicationPages(router);
  return router.routes() as Middleware<AppState>;
}
