import type { Db } from '../database.js';

/**
 * The LFS objects linked to a project, as `<count>:<highest id>`, or null when there are none
 * (archives replace pointers only then). Links are only ever added, so this names the set: an
 * archive cached with one value is what a new generation would make while it holds.
 */
export async function projectLfsState(db: Db, projectId: number): Promise<string | null> {
  const row = await db
    .selectFrom('lfs_objects_projects')
    .select((eb) => [eb.fn.countAll<string | number>().as('count'), eb.fn.max('lfs_object_id').as('last')])
    .where('project_id', '=', projectId)
    .executeTakeFirst();
  const count = Number(row?.count ?? 0);
  return count > 0 ? `${count}:${row?.last}` : null;
}

/** The LFS object `oid` when it is linked to the project. */
export async function findProjectLfsObject(db: Db, projectId: number, oid: string) {
  return db
    .selectFrom('lfs_objects')
    .innerJoin('lfs_objects_projects', 'lfs_objects_projects.lfs_object_id', 'lfs_objects.id')
    .select(['lfs_objects.id', 'lfs_objects.oid', 'lfs_objects.size'])
    .where('lfs_objects_projects.project_id', '=', projectId)
    .where('lfs_objects.oid', '=', oid)
    .executeTakeFirst();
}

/** Records an object and links it to a project; both steps are idempotent. */
export async function linkLfsObject(db: Db, projectId: number, oid: string, size: number): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('lfs_objects')
      .values({ oid, size })
      .onConflict((oc) => oc.column('oid').doNothing())
      .execute();
    const object = await trx.selectFrom('lfs_objects').select('id').where('oid', '=', oid).executeTakeFirstOrThrow();
    await trx
      .insertInto('lfs_objects_projects')
      .values({ lfs_object_id: object.id, project_id: projectId })
      .onConflict((oc) => oc.columns(['project_id', 'lfs_object_id']).doNothing())
      .execute();
  });
}
