import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { ProjectCache } from '../db/project-cache.js';
import type { Clock } from '../lib/clock.js';
import { utcDate } from '../lib/clock.js';
import type { Storages } from '../storage/storages.js';

/** What services need from the outside world; built once in main.ts (or by the test harness). */
export interface Deps {
  config: Config;
  db: Db;
  clock: Clock;
  logger: Logger;
  storages: Storages;
  /** Project lookups kept in process, when the database says it is safe (DESIGN.md). */
  projectCache?: ProjectCache | undefined;
}

/** Today's date in UTC by the injected clock. */
export const today = (deps: Pick<Deps, 'clock'>) => utcDate(deps.clock.now());
