import { z } from 'zod';
import { listOauthApplications } from '../db/queries/oauth.js';
import { notFound } from '../http/errors.js';
import { p } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentApplication, presentApplicationWithSecret } from '../presenters/application.js';
import { createOauthApplication, deleteApplication } from '../services/oauth-applications.js';
import { created, noContent, requireAdmin } from './helpers.js';

const createParams = z.object({
  name: p.string(),
  redirect_uri: p.string(),
  scopes: p.string().refine((s) => s.trim() !== '', 'is empty'),
  confidential: p.bool().default(true),
});

const idParams = z.object({ id: p.id() });

/** The admin Applications API (GitLab's lib/api/applications.rb): instance-wide OAuth applications. */
export function registerApplicationRoutes(api: ApiRouter): void {
  api.post(
    '/applications',
    {
      summary: 'Create an OAuth application',
      auth: 'required',
      admin: true,
      params: createParams,
      tags: ['applications'],
    },
    async (ctx, params) => {
      requireAdmin(ctx);
      const { application, secret } = await createOauthApplication(ctx.state.deps, null, {
        name: params.name,
        redirectUri: params.redirect_uri,
        scopes: params.scopes.split(/\s+/).filter((s) => s !== ''),
        confidential: params.confidential,
      });
      created(ctx, presentApplicationWithSecret(application, secret));
    },
  );

  api.get(
    '/applications',
    { summary: 'List OAuth applications', auth: 'required', admin: true, tags: ['applications'] },
    async (ctx) => {
      requireAdmin(ctx);
      const apps = await listOauthApplications(ctx.state.deps.db);
      ctx.body = apps.map(presentApplication);
    },
  );

  api.delete(
    '/applications/:id',
    { summary: 'Delete an OAuth application', auth: 'required', admin: true, params: idParams, tags: ['applications'] },
    async (ctx, params) => {
      requireAdmin(ctx);
      if (!(await deleteApplication(ctx.state.deps, params.id))) throw notFound('Application');
      noContent(ctx);
    },
  );
}
