import { z } from 'zod';
import type { Project } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { notFound } from '../http/errors.js';
import { type Params, p } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentIntegration, presentIntegrationBasic } from '../presenters/integration.js';
import {
  eventFlagsOf,
  INTEGRATION_KINDS,
  INTEGRATION_SLUGS,
  type IntegrationField,
  type IntegrationKind,
} from '../services/integration-catalog.js';
import {
  disableIntegration,
  findIntegration,
  listActiveIntegrations,
  saveIntegration,
} from '../services/integrations.js';
import { loadProject, noContent } from './helpers.js';

/** The project each request found, so that the check before the parameters is not made twice. */
const checked = new WeakMap<AppContext, Project>();

/** The project, for maintainers and owners (GitLab's `authorize_admin_project`). */
async function adminProject(ctx: AppContext, id: string): Promise<Project> {
  const found = checked.get(ctx);
  if (found) return found;
  const loaded = await loadProject(ctx, id);
  loaded.policy.authorize('admin_project');
  checked.set(ctx, loaded.project);
  return loaded.project;
}

/**
 * integrations.rb's `before { authorize_admin_project }` runs before Grape validates the
 * parameters: whoever may not administer the project gets 403 (404 when they cannot see it),
 * never a 400 about the body.
 */
const before = async (ctx: AppContext, raw: Params) => {
  await adminProject(ctx, String(raw.id));
};

function fieldSchema(field: IntegrationField): z.ZodType {
  if (field.type === 'boolean') return p.bool().optional();
  if (field.type === 'integer') return p.int().optional();
  if (field.values) return p.enum(field.values as [string, ...string[]]).optional();
  return p.string().optional();
}

/** The PUT parameters of one kind: its settings and its event flags, all checked for type. */
function putSchema(kind: IntegrationKind) {
  const shape: Record<string, z.ZodType> = { id: p.string() };
  for (const field of kind.fields) shape[field.name] = fieldSchema(field);
  for (const flag of eventFlagsOf(kind)) shape[flag] = p.bool().optional();
  shape.active = p.bool().optional();
  return z.object(shape);
}

const kindOf = (slug: string): IntegrationKind => {
  const kind = INTEGRATION_KINDS.get(slug);
  if (!kind) throw notFound('Integration');
  return kind;
};

/**
 * Project integrations (GitLab's lib/api/integrations.rb), at `/integrations` and the older
 * `/services` path alike: maintainers and owners only.
 */
export function registerIntegrationRoutes(api: ApiRouter): void {
  const tags = ['integrations'];
  const slugParams = z.object({ id: p.string(), slug: p.enum(INTEGRATION_SLUGS) });

  for (const path of ['integrations', 'services']) {
    api.get(
      `/projects/:id/${path}`,
      { summary: 'List all active integrations', auth: 'required', before, params: z.object({ id: p.string() }), tags },
      async (ctx, params) => {
        const project = await adminProject(ctx, params.id);
        const rows = await listActiveIntegrations(ctx.state.deps, project.id);
        ctx.body = rows.flatMap((row) => {
          const kind = INTEGRATION_KINDS.get(row.slug);
          return kind ? [presentIntegrationBasic(kind, row)] : [];
        });
      },
    );

    for (const kind of INTEGRATION_KINDS.values()) {
      api.put(
        `/projects/:id/${path}/${kind.slug}`,
        {
          summary: `Create or edit the ${kind.title} integration`,
          auth: 'required',
          before,
          params: putSchema(kind),
          tags,
        },
        async (ctx, params) => {
          const project = await adminProject(ctx, String(params.id));
          const saved = await saveIntegration(ctx.state.deps, project, kind, params as Record<string, unknown>);
          ctx.body = presentIntegration(kind, saved);
        },
      );
    }

    api.get(
      `/projects/:id/${path}/:slug`,
      { summary: 'Get the settings of an integration', auth: 'required', before, params: slugParams, tags },
      async (ctx, params) => {
        const project = await adminProject(ctx, params.id);
        const kind = kindOf(params.slug);
        const row = await findIntegration(ctx.state.deps, project.id, kind.slug);
        if (!row) throw notFound('Integration');
        ctx.body = presentIntegration(kind, row);
      },
    );

    api.delete(
      `/projects/:id/${path}/:slug`,
      { summary: 'Disable an integration and forget its settings', auth: 'required', before, params: slugParams, tags },
      async (ctx, params) => {
        const project = await adminProject(ctx, params.id);
        const kind = kindOf(params.slug);
        await disableIntegration(ctx.state.deps, project.id, kind.slug);
        noContent(ctx);
      },
    );
  }
}
