import { z } from 'zod';
import { atLeastOneOf, p, toInteger } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentApplicationSettings } from '../presenters/application-settings.js';
import { getApplicationSettings, updateApplicationSettings } from '../services/application-settings.js';
import { registrationTokens } from '../services/ci/runners.js';
import type { Deps } from '../services/deps.js';
import {
  COMPANIONS,
  DEPRECATED_NAMES,
  SETTINGS,
  SETTINGS_BY_NAME,
  type SettingDefinition,
} from '../services/settings-catalog.js';
import { auditActor, requireAdmin } from './helpers.js';

/** GitLab shows administrators the instance's runner registration token with the settings. */
async function withRunnersToken(deps: Deps, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const token = (await registrationTokens(deps, 'instance', [0])).get(0);
  return { ...body, runners_registration_token: token };
}

const toNumber = (value: unknown) => {
  if (typeof value === 'string' && /^[+-]?(\d+(\.\d*)?|\.\d+)$/.test(value.trim())) return Number(value.trim());
  return value;
};

/** The parameter of one attribute, coerced as Grape does (`values:` → "does not have a valid value"). */
function parameter(def: SettingDefinition): z.ZodType {
  switch (def.kind) {
    case 'boolean':
      return p.bool();
    case 'integer':
      return def.values
        ? z.preprocess(toInteger, z.literal(def.values as readonly number[] as [number, ...number[]]))
        : p.int();
    case 'float':
      return z.preprocess(toNumber, z.number());
    case 'string':
      return def.values ? p.enum(def.values as readonly string[] as [string, ...string[]]) : p.string();
    case 'strings':
    case 'visibility_levels':
      return p.array(p.string());
    case 'integers':
      return p.array(p.intItem());
    case 'visibility':
      return p.enum(['private', 'internal', 'public']);
    case 'weights':
      return z.record(z.string(), p.int());
  }
}

const shape: Record<string, z.ZodType> = {};
for (const def of SETTINGS) {
  shape[def.name] = parameter(def).optional();
  if (def.alias) shape[def.alias] = parameter(def).optional();
}
for (const [old, successor] of Object.entries(DEPRECATED_NAMES)) {
  shape[old] = parameter(SETTINGS_BY_NAME.get(successor) as SettingDefinition).optional();
}
/** Deprecated: the storages new repositories may go to; the others get weight 0. */
shape.repository_storages = p.array(p.string()).optional();
shape.hashed_storage_enabled = p.bool().optional();

const SETTING_PARAMS = Object.keys(shape);

/** The name a request used for an attribute: GitLab's or the spec's alias. */
const spelled = (input: Record<string, unknown>, name: string): string | undefined => {
  const alias = SETTINGS_BY_NAME.get(name)?.alias;
  if (input[name] !== undefined) return name;
  if (alias && input[alias] !== undefined) return alias;
  return undefined;
};

const updateParams = z.object(shape).superRefine((input, ctx) => {
  atLeastOneOf(input, SETTING_PARAMS, ctx);
  // Grape's `given X: true → requires Y`, named in the spelling the request used for X.
  for (const [trigger, companions] of Object.entries(COMPANIONS)) {
    const used = spelled(input, trigger);
    if (used === undefined || input[used] !== true) continue;
    const viaAlias = used !== trigger;
    for (const companion of companions) {
      if (spelled(input, companion) !== undefined) continue;
      const name = viaAlias ? (SETTINGS_BY_NAME.get(companion)?.alias ?? companion) : companion;
      ctx.addIssue({ code: 'custom', message: 'is missing', path: [name] });
    }
  }
});

export function registerApplicationSettingsRoutes(api: ApiRouter): void {
  api.get(
    '/application/settings',
    { summary: 'The application settings', auth: 'required', admin: true, tags: ['settings'] },
    async (ctx) => {
      requireAdmin(ctx);
      ctx.body = await withRunnersToken(
        ctx.state.deps,
        presentApplicationSettings(await getApplicationSettings(ctx.state.deps)),
      );
    },
  );

  api.put(
    '/application/settings',
    { summary: 'Change application settings', auth: 'required', admin: true, tags: ['settings'], params: updateParams },
    async (ctx, params) => {
      const admin = requireAdmin(ctx);
      await updateApplicationSettings(ctx.state.deps, auditActor(ctx, admin), params);
      ctx.body = await withRunnersToken(
        ctx.state.deps,
        presentApplicationSettings(await getApplicationSettings(ctx.state.deps)),
      );
    },
  );
}
