import { z } from 'zod';
import { atLeastOneOf, p } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentApplicationSettings } from '../presenters/application-settings.js';
import { readApplicationSettings, updateApplicationSettings } from '../services/application-settings.js';
import { requireAdmin } from './helpers.js';

/** The settings PUT accepts so far (GitLab's lib/api/settings.rb declares many more). */
const SETTING_NAMES = ['repository_storages_weighted', 'repository_storages', 'oauth_password_grant_enabled'];

const updateParams = z
  .object({
    repository_storages_weighted: z.record(z.string(), p.int()).optional(),
    repository_storages: p.array(p.string()).optional(),
    oauth_password_grant_enabled: p.bool().optional(),
  })
  .superRefine((v, ctx) => atLeastOneOf(v, SETTING_NAMES, ctx));

export function registerApplicationSettingsRoutes(api: ApiRouter): void {
  api.get(
    '/application/settings',
    { summary: 'The application settings', auth: 'required', tags: ['settings'] },
    async (ctx) => {
      requireAdmin(ctx);
      ctx.body = presentApplicationSettings(await readApplicationSettings(ctx.state.deps));
    },
  );

  api.put(
    '/application/settings',
    { summary: 'Change application settings', auth: 'required', tags: ['settings'], params: updateParams },
    async (ctx, params) => {
      requireAdmin(ctx);
      await updateApplicationSettings(ctx.state.deps, params);
      ctx.body = presentApplicationSettings(await readApplicationSettings(ctx.state.deps));
    },
  );
}
