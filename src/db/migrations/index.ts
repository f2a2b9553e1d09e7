import type { Migration } from 'kysely';
import * as m0001 from './0001-foundation.js';

/** Every migration in order. Names never change once landed. */
export const migrations: Record<string, Migration> = {
  '0001-foundation': m0001,
};
