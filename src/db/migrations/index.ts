import type { Migration } from 'kysely';
import * as m0001 from './0001-foundation.js';
import * as m0002 from './0002-repository.js';

/** Every migration in order. Names never change once landed. */
export const migrations: Record<string, Migration> = {
  '0001-foundation': m0001,
  '0002-repository': m0002,
};
