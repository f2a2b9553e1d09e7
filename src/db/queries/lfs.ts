import type { Db } from '../database.js';

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

/** Records an object and links it to a project, raising the project's LFS version; idempotent. */
export async function linkLfsObject(db: Db, projectId: number, oid: string, size: number): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('lfs_objects')
      .values({ oid, size })
      .onConflict((oc) => oc.column('oid').doNothing())
      .execute();
    const object = await trx.selectFrom('lfs_objects').select('id').where('oid', '=', oid).executeTakeFirstOrThrow();
    const linked = await trx
      .insertInto('lfs_objects_projects')
      .values({ lfs_object_id: object.id, project_id: projectId })
      .onConflict((oc) => oc.columns(['project_id', 'lfs_object_id']).doNothing())
      .executeTakeFirst();
    // A new object may change the project's archives: their cache key and ETag follow this.
    if (Number(linked.numInsertedOrUpdatedRows ?? 0) > 0) {
      await trx
        .updateTable('projects')
        .set((eb) => ({ lfs_objects_version: eb('lfs_objects_version', '+', 1) }))
        .where('id', '=', projectId)
        .execute();
    }
  });
}
