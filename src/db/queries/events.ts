import type { Insertable } from 'kysely';
import type { Db } from '../database.js';
import type { EventsTable } from '../schema.js';

/** Records an activity event; call inside the transaction of the change it describes. */
export async function insertEvent(db: Db, event: Insertable<EventsTable>): Promise<void> {
  await db.insertInto('events').values(event).execute();
}
