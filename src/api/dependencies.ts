import fs from 'node:fs/promises';
import { z } from 'zod';
import { paramError, unauthorized } from '../http/errors.js';
import { paginateArray } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import { type ApiRouter, isUploadedFile } from '../http/route.js';
import { importAdvisories, parseAdvisoryText } from '../services/dependencies/advisories.js';
import { projectDependencies, vulnerabilitiesOf } from '../services/dependencies/index.js';
import { PACKAGE_MANAGERS, type PackageManager } from '../services/dependencies/lockfiles.js';
import { created, loadProject, requireAdmin } from './helpers.js';

/** Advisory files up to this size are read (OSV exports of one ecosystem run to a few MiB). */
const MAX_ADVISORY_FILE_BYTES = 64 * 1024 * 1024;

/** GitLab's dependency list (ee/lib/api/dependencies.rb) and Depot's advisory import. */
export function registerDependencyRoutes(api: ApiRouter): void {
  api.get(
    '/projects/:id/dependencies',
    {
      summary: "The default branch's dependencies",
      auth: 'required',
      tags: ['dependencies'],
      params: z.object({ id: z.string(), package_manager: p.array(p.string()).optional(), ...pagination() }),
    },
    async (ctx, params) => {
      const managers = params.package_manager;
      if (managers?.some((m) => !(PACKAGE_MANAGERS as readonly string[]).includes(m))) {
        throw paramError(['package_manager does not have a valid value']);
      }
      const { project, policy } = await loadProject(ctx, params.id);
      policy.authorize('read_code');
      const deps = ctx.state.deps;
      const all = await projectDependencies(deps, project, managers as PackageManager[] | undefined);
      const page = paginateArray(ctx, deps.config.baseUrl, params, all);
      // GitLab shows vulnerabilities to those who may read the security dashboard (developers and up).
      const vulnerabilities = policy.can('read_security_resource') ? await vulnerabilitiesOf(deps, page) : null;
      ctx.body = page.map((dependency, index) => ({
        name: dependency.name,
        version: dependency.version,
        package_manager: dependency.packageManager,
        dependency_file_path: dependency.path,
        ...(vulnerabilities ? { vulnerabilities: vulnerabilities[index] } : {}),
      }));
    },
  );

  api.post(
    '/admin/security/advisories',
    {
      summary: 'Import security advisories (OSV)',
      auth: 'required',
      admin: true,
      tags: ['dependencies'],
      params: z.object({ advisories: z.array(z.unknown()).optional(), file: z.unknown().optional() }),
    },
    async (ctx, params) => {
      requireAdmin(ctx);
      let records: unknown[] = params.advisories ?? [];
      if (params.file !== undefined) {
        if (!isUploadedFile(params.file)) throw paramError(['file is invalid']);
        if (params.file.size > MAX_ADVISORY_FILE_BYTES) throw paramError(['file is too large']);
        try {
          records = records.concat(parseAdvisoryText(await fs.readFile(params.file.path, 'utf8')));
        } catch {
          throw paramError(['file is invalid']);
        }
      }
      if (records.length === 0)
        throw paramError(['advisories, file are missing, at least one parameter must be provided']);
      if (!ctx.state.actor.user) throw unauthorized();
      created(ctx, await importAdvisories(ctx.state.deps.db, records));
    },
  );
}
