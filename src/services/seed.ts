import { buildSampleRepository } from '../../fixtures/sample-repo.js';
import { findUserByUsername } from '../db/queries/users.js';
import type { Project } from '../db/schema.js';
import type { Deps } from './deps.js';
import { createGroup } from './groups.js';
import { createProject } from './projects.js';

export const DEMO_GROUP = 'demo';
export const DEMO_PROJECT = 'sample';

/** First start with SEED_DEMO: a public `demo` group with a public project built from fixtures/. */
export async function seedDemo(deps: Deps): Promise<Project> {
  const root = await findUserByUsername(deps.db, 'root');
  if (!root) throw new Error('seedDemo needs the root user');
  const group = await createGroup(
    deps,
    root,
    { name: 'Demo', path: DEMO_GROUP, visibility: 'public', description: 'Sample data to explore Depot with.' },
    null,
  );
  const project = await createProject(
    deps,
    root,
    {
      name: 'Sample',
      path: DEMO_PROJECT,
      visibility: 'public',
      description: 'A sample repository: nested folders, unicode names, binaries, tags and changelog trailers.',
    },
    group,
  );
  const repoPath = deps.storages.repositoryPath(project.repository_storage, project.id);
  await buildSampleRepository(repoPath);
  return project;
}
