import fs from 'node:fs/promises';
import { z } from 'zod';
import type { AppContext } from '../http/context.js';
import { badRequestMessage, notFound, paramError } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import { type ApiRouter, isUploadedFile } from '../http/route.js';
import { presentPagesDomain, presentPagesDomainBasic } from '../presenters/pages-domain.js';
import {
  countPagesDomains,
  createPagesDomain,
  deletePagesDomain,
  findPagesDomain,
  findPagesDomainByName,
  listPagesDomains,
  updatePagesDomain,
  verifyPagesDomain,
} from '../services/pages-domains.js';
import { created, loadProject, noContent, requireAdmin } from './helpers.js';

/** A certificate or key: a string field, or an uploaded file (Grape's `types: [File, String]`). */
const material = z.unknown().optional();

async function materialText(value: unknown, name: string): Promise<string | null | undefined> {
  if (value === undefined) return undefined;
  if (value === null) return null;
  if (typeof value === 'string') return value;
  if (isUploadedFile(value)) return fs.readFile(value.path, 'utf8');
  throw paramError([`${name} is invalid`]);
}

const projectParams = { id: z.string() };
const domainParams = { ...projectParams, domain: z.string() };

async function loadDomain(ctx: AppContext, id: string, name: string, ability: 'read_pages' | 'update_pages') {
  const { project, policy } = await loadProject(ctx, id);
  policy.authorize(ability);
  const domain = await findPagesDomain(ctx.state.deps.db, project.id, name);
  if (!domain) throw notFound('PagesDomain');
  return { project, domain };
}

/** GitLab's Pages domains API (lib/api/pages_domains.rb): maintainers manage a project's domains. */
export function registerPagesDomainRoutes(api: ApiRouter): void {
  api.get(
    '/pages/domains',
    {
      summary: 'Every Pages domain of the instance',
      auth: 'required',
      admin: true,
      tags: ['pages_domains'],
      params: z.object({ domain: p.string().optional(), ...pagination() }),
    },
    async (ctx, params) => {
      requireAdmin(ctx);
      const { db, config, clock } = ctx.state.deps;
      const now = clock.now();
      if (params.domain) {
        const found = await findPagesDomainByName(db, params.domain);
        if (!found) throw notFound('PagesDomain');
        ctx.body = [presentPagesDomainBasic(found, now)];
        return;
      }
      const domains = await paginateQuery(
        ctx,
        config.baseUrl,
        params,
        (window) => listPagesDomains(db, undefined, window),
        (limit) => countPagesDomains(db, undefined, limit),
      );
      ctx.body = domains.map((domain) => presentPagesDomainBasic(domain, now));
    },
  );

  api.get(
    '/projects/:id/pages/domains',
    {
      summary: "A project's Pages domains",
      auth: 'required',
      tags: ['pages_domains'],
      params: z.object({ ...projectParams, ...pagination() }),
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      policy.authorize('read_pages');
      const { db, config, clock } = ctx.state.deps;
      const domains = await paginateQuery(
        ctx,
        config.baseUrl,
        params,
        (window) => listPagesDomains(db, project.id, window),
        (limit) => countPagesDomains(db, project.id, limit),
      );
      const now = clock.now();
      ctx.body = domains.map((domain) => presentPagesDomain(domain, now));
    },
  );

  api.get(
    '/projects/:id/pages/domains/:domain',
    { summary: 'One Pages domain', auth: 'required', tags: ['pages_domains'], params: z.object(domainParams) },
    async (ctx, params) => {
      const { domain } = await loadDomain(ctx, params.id, params.domain, 'read_pages');
      ctx.body = presentPagesDomain(domain, ctx.state.deps.clock.now());
    },
  );

  api.post(
    '/projects/:id/pages/domains',
    {
      summary: 'Add a Pages domain',
      auth: 'required',
      tags: ['pages_domains'],
      params: z.object({
        ...projectParams,
        domain: p.string(),
        certificate: material,
        key: material,
        auto_ssl_enabled: p.bool().default(false),
      }),
    },
    async (ctx, params) => {
      // Grape's all_or_none_of, checked with the other parameters before the permission.
      if ((params.certificate === undefined) !== (params.key === undefined)) {
        throw paramError(['certificate, key provide all or none of parameters']);
      }
      const certificate = await materialText(params.certificate, 'certificate');
      const key = await materialText(params.key, 'key');
      const { project, policy } = await loadProject(ctx, params.id);
      policy.authorize('update_pages');
      const domain = await createPagesDomain(ctx.state.deps, project.id, {
        domain: params.domain,
        certificate,
        key,
        auto_ssl_enabled: params.auto_ssl_enabled,
      });
      created(ctx, presentPagesDomain(domain, ctx.state.deps.clock.now()));
    },
  );

  api.put(
    '/projects/:id/pages/domains/:domain',
    {
      summary: 'Change a Pages domain',
      auth: 'required',
      tags: ['pages_domains'],
      params: z.object({
        ...domainParams,
        certificate: material,
        key: material,
        auto_ssl_enabled: p.bool().optional(),
      }),
    },
    async (ctx, params) => {
      const certificate = await materialText(params.certificate, 'certificate');
      const key = await materialText(params.key, 'key');
      const { domain } = await loadDomain(ctx, params.id, params.domain, 'update_pages');
      const updated = await updatePagesDomain(ctx.state.deps, domain, {
        certificate,
        key,
        auto_ssl_enabled: params.auto_ssl_enabled,
      });
      ctx.body = presentPagesDomain(updated, ctx.state.deps.clock.now());
    },
  );

  api.put(
    '/projects/:id/pages/domains/:domain/verify',
    { summary: 'Verify a Pages domain now', auth: 'required', tags: ['pages_domains'], params: z.object(domainParams) },
    async (ctx, params) => {
      const { domain } = await loadDomain(ctx, params.id, params.domain, 'update_pages');
      const result = await verifyPagesDomain(ctx.state.deps, domain);
      if (!result.verified) throw badRequestMessage(result.message ?? `Couldn't verify ${domain.domain}`);
      const fresh = await findPagesDomain(ctx.state.deps.db, domain.project_id, domain.domain);
      ctx.body = presentPagesDomain(fresh ?? domain, ctx.state.deps.clock.now());
    },
  );

  api.delete(
    '/projects/:id/pages/domains/:domain',
    { summary: 'Remove a Pages domain', auth: 'required', tags: ['pages_domains'], params: z.object(domainParams) },
    async (ctx, params) => {
      const { domain } = await loadDomain(ctx, params.id, params.domain, 'update_pages');
      await deletePagesDomain(ctx.state.deps.db, domain);
      noContent(ctx);
    },
  );
}
