import type { RouterContext } from '@koa/router';

import type { Logger } from 'pino';
import type { Actor } from '../services/auth.js';
import type { Deps } from '../services/deps.js';

export interface AppState {
  deps: Deps;
  requestId: string;
  log: Logger;
  /** Set by the route's authentication step. */
  actor: Actor;
}

export type AppContext = RouterContext<AppState>;
