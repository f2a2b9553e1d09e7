import type { Db } from '../database.js';

/** True when any LFS object is linked to the project (archives rewrite pointers only then). */
export async function projectHasLfsObjects(db: Db, projectId: number): Promise<boolean> {
  const row = await db
    .selectFrom('lfs_objects_projects')
    .select('lfs_object_id')
    .where('project_id', '=', projectId)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
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
