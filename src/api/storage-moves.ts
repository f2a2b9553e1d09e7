import { z } from 'zod';
import { findNamespacesByIds } from '../db/queries/namespaces.js';
import { countMoves, findMoveOf, listMoves } from '../db/queries/storage-moves.js';
import type { Project, StorageMove, StorageMoveContainer } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { notFound, paramError, recordNotFound } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentProjectIdentity } from '../presenters/project.js';
import {
  presentGroupStorageMove,
  presentProjectStorageMove,
  presentSnippetStorageMove,
} from '../presenters/storage-move.js';
import { Validation } from '../services/errors.js';
import { findGroup } from '../services/groups.js';
import { namespaceFullNames } from '../services/project-views.js';
import { findProjectAndNamespace } from '../services/projects.js';
import { enqueueBulkMoves, type MoveContainer, scheduleMove } from '../storage/moves.js';
import { accepted, created, refuseMovedPath, requireAdmin } from './helpers.js';

/**
 * Repository storage moves (GitLab's lib/api/{project,snippet,group}_repository_storage_moves.rb):
 * administrators only, for projects, snippets and group wikis on one machinery.
 */

const TAGS = ['storage_moves'];
const moveIdParam = { repository_storage_move_id: p.int() };
const bulkParams = z.object({
  source_storage_name: p.string(),
  destination_storage_name: p.string().optional(),
});
const createParams = z.object({ id: p.string(), destination_storage_name: p.string().optional() });

/** Presents moves of one container type, loading what their entity shows in one batch. */
async function presentMoves(ctx: AppContext, type: StorageMoveContainer, moves: StorageMove[]) {
  const deps = ctx.state.deps;
  const pc = { baseUrl: deps.config.baseUrl };
  const ids = [...new Set(moves.map((m) => m.container_id))];
  if (type === 'project') {
    const projects: Project[] =
      ids.length === 0 ? [] : await deps.db.selectFrom('projects').selectAll().where('id', 'in', ids).execute();
    const namespaces = await findNamespacesByIds(
      deps.db,
      projects.map((pr) => pr.namespace_id),
    );
    const names = await namespaceFullNames(deps, namespaces);
    const byId = new Map(projects.map((pr) => [pr.id, pr]));
    return moves.map((move) => {
      const project = byId.get(move.container_id);
      return presentProjectStorageMove(
        move,
        project ? presentProjectIdentity(project, names.get(project.namespace_id) ?? '') : null,
      );
    });
  }
  if (type === 'group') {
    const groups = new Map((await findNamespacesByIds(deps.db, ids)).map((g) => [g.id, g]));
    return moves.map((move) => presentGroupStorageMove(move, groups.get(move.container_id) ?? null, pc));
  }
  return moves.map((move) => presentSnippetStorageMove(move));
}

/** The container `:id` names, as an administrator sees it, or GitLab's 404. */
async function loadContainer(ctx: AppContext, type: StorageMoveContainer, id: string): Promise<MoveContainer> {
  const deps = ctx.state.deps;
  if (type === 'project') {
    const found = await findProjectAndNamespace(deps, id);
    if (!found) throw notFound('Project');
    refuseMovedPath(ctx, id, found.project);
    return { type, project: found.project };
  }
  if (type === 'group') {
    const group = await findGroup(deps, id);
    if (!group) throw notFound('Group');
    return { type, group };
  }
  // Depot has no snippets yet.
  throw notFound('Snippet');
}

const containerIdOf = (c: MoveContainer) =>
  c.type === 'project' ? c.project.id : c.type === 'group' ? c.group.id : c.id;

function registerFor(api: ApiRouter, type: StorageMoveContainer, plural: string): void {
  const resource = `/${type}_repository_storage_moves`;
  const label = type === 'group' ? 'group' : type;

  api.get(
    resource,
    {
      summary: `List ${label} repository storage moves`,
      auth: 'required',
      admin: true,
      tags: TAGS,
      params: z.object(pagination()),
    },
    async (ctx, params) => {
      requireAdmin(ctx);
      const db = ctx.state.deps.db;
      const moves = await paginateQuery(
        ctx,
        ctx.state.deps.config.baseUrl,
        params,
        (w) => listMoves(db, { type }, w),
        (cap) => countMoves(db, { type }, cap),
      );
      ctx.body = await presentMoves(ctx, type, moves);
    },
  );

  api.get(
    `${resource}/:repository_storage_move_id`,
    {
      summary: `A ${label} repository storage move`,
      auth: 'required',
      admin: true,
      tags: TAGS,
      params: z.object(moveIdParam),
    },
    async (ctx, params) => {
      requireAdmin(ctx);
      const move = await findMoveOf(ctx.state.deps.db, type, params.repository_storage_move_id);
      if (!move) throw recordNotFound();
      ctx.body = (await presentMoves(ctx, type, [move]))[0];
    },
  );

  api.post(
    resource,
    {
      summary: `Schedule moves of every ${label} repository on a storage`,
      auth: 'required',
      admin: true,
      tags: TAGS,
      params: bulkParams,
    },
    async (ctx, params) => {
      requireAdmin(ctx);
      const storages = ctx.state.deps.storages;
      const invalid: string[] = [];
      if (!storages.has(params.source_storage_name)) invalid.push('source_storage_name does not have a valid value');
      if (params.destination_storage_name !== undefined && !storages.has(params.destination_storage_name)) {
        invalid.push('destination_storage_name does not have a valid value');
      }
      if (invalid.length > 0) throw paramError(invalid);
      if (params.destination_storage_name === params.source_storage_name) {
        new Validation().add('destination_storage_name', 'must be different from the source storage').throwIfAny();
      }
      await enqueueBulkMoves(ctx.state.deps, type, params.source_storage_name, params.destination_storage_name);
      accepted(ctx);
    },
  );

  api.get(
    `/${plural}/:id/repository_storage_moves`,
    {
      summary: `List the repository storage moves of a ${label}`,
      auth: 'required',
      admin: true,
      tags: TAGS,
      params: z.object({ id: p.string(), ...pagination() }),
    },
    async (ctx, params) => {
      requireAdmin(ctx);
      const container = await loadContainer(ctx, type, params.id);
      const db = ctx.state.deps.db;
      const filter = { type, containerId: containerIdOf(container) };
      const moves = await paginateQuery(
        ctx,
        ctx.state.deps.config.baseUrl,
        params,
        (w) => listMoves(db, filter, w),
        (cap) => countMoves(db, filter, cap),
      );
      ctx.body = await presentMoves(ctx, type, moves);
    },
  );

  api.get(
    `/${plural}/:id/repository_storage_moves/:repository_storage_move_id`,
    {
      summary: `A repository storage move of a ${label}`,
      auth: 'required',
      admin: true,
      tags: TAGS,
      params: z.object({ id: p.string(), ...moveIdParam }),
    },
    async (ctx, params) => {
      requireAdmin(ctx);
      const container = await loadContainer(ctx, type, params.id);
      const move = await findMoveOf(
        ctx.state.deps.db,
        type,
        params.repository_storage_move_id,
        containerIdOf(container),
      );
      if (!move) throw recordNotFound();
      ctx.body = (await presentMoves(ctx, type, [move]))[0];
    },
  );

  api.post(
    `/${plural}/:id/repository_storage_moves`,
    {
      summary: `Schedule a repository storage move of a ${label}`,
      auth: 'required',
      admin: true,
      tags: TAGS,
      params: createParams,
    },
    async (ctx, params) => {
      requireAdmin(ctx);
      const container = await loadContainer(ctx, type, params.id);
      const move = await scheduleMove(ctx.state.deps, container, params.destination_storage_name);
      created(ctx, (await presentMoves(ctx, type, [move]))[0]);
    },
  );
}

export function registerStorageMoveRoutes(api: ApiRouter): void {
  registerFor(api, 'project', 'projects');
  registerFor(api, 'snippet', 'snippets');
  registerFor(api, 'group', 'groups');
}
