import type { Updateable } from 'kysely';
import { pgErrorCode, UNIQUE_VIOLATION } from '../db/database.js';
import { insertEvent } from '../db/queries/events.js';
import { insertMember } from '../db/queries/members.js';
import { findNamespaceByFullPath, findNamespaceById } from '../db/queries/namespaces.js';
import {
  deleteProject as deleteProjectRows,
  findProjectByFullPath,
  findProjectById,
  insertProject,
  updateProject as updateProjectRow,
} from '../db/queries/projects.js';
import type { Namespace, Project, ProjectFeatures, ProjectsTable, User, Visibility } from '../db/schema.js';
import { initBareRepository, removeRepository } from '../git/repository.js';
import { isValidBranchName } from '../git/validate.js';
import { commitFiles } from '../git/write.js';
import { notFound } from '../http/errors.js';
import { toDbId } from '../lib/ids.js';
import { AccessLevel } from '../policies/access-levels.js';
import { pickStorage } from '../storage/placement.js';
import type { Deps } from './deps.js';
import { Validation } from './errors.js';
import {
  isReservedChild,
  isValidPath,
  isValidProjectName,
  PROJECT_NAME_MESSAGE,
  PROJECT_PATH_MESSAGE,
  pathFromName,
} from './paths.js';
import { fitsWithin } from './visibility.js';

export const DEFAULT_BRANCH = 'main';

export const FEATURE_NAMES = [
  'issues',
  'repository',
  'merge_requests',
  'forking',
  'wiki',
  'builds',
  'snippets',
  'pages',
  'analytics',
  'operations',
  'security_and_compliance',
  'container_registry',
  'environments',
  'feature_flags',
  'infrastructure',
  'releases',
  'monitor',
  'model_experiments',
  'model_registry',
  'requirements',
] as const satisfies readonly (keyof ProjectFeatures)[];

export const FEATURE_LEVELS = ['disabled', 'private', 'enabled', 'public'] as const;

export function defaultFeatures(): ProjectFeatures {
  const features = Object.fromEntries(FEATURE_NAMES.map((f) => [f, 'enabled'])) as unknown as ProjectFeatures;
  features.pages = 'private';
  features.security_and_compliance = 'private';
  return features;
}

/** Settings kept in the project's `settings` JSON (shown in responses, no behaviour yet). */
export interface ProjectSettings {
  only_allow_merge_if_pipeline_succeeds?: boolean;
  only_allow_merge_if_all_discussions_are_resolved?: boolean;
  remove_source_branch_after_merge?: boolean;
  merge_method?: string;
  squash_option?: string;
  ci_config_path?: string | null;
  shared_runners_enabled?: boolean;
  printing_merge_request_link_enabled?: boolean;
  emails_enabled?: boolean;
  auto_devops_enabled?: boolean;
  packages_enabled?: boolean;
  service_desk_enabled?: boolean;
  approvals_before_merge?: number;
  allow_merge_on_skipped_pipeline?: boolean | null;
  autoclose_referenced_issues?: boolean;
  suggestion_commit_message?: string | null;
  merge_commit_template?: string | null;
  squash_commit_template?: string | null;
  issue_branch_template?: string | null;
  build_timeout?: number;
  ci_default_git_depth?: number;
}

export interface ProjectInput {
  name?: string;
  path?: string;
  description?: string | null;
  visibility?: Visibility;
  default_branch?: string;
  request_access_enabled?: boolean;
  lfs_enabled?: boolean;
  archived?: boolean;
  topics?: string[];
  features?: Partial<ProjectFeatures>;
  settings?: ProjectSettings;
}

export interface CreateProjectInput extends ProjectInput {
  namespace?: Namespace;
  initializeWithReadme?: boolean;
  repositoryStorage?: string;
}

/** Looks up a project by numeric id or full path (a bare name without a slash is not found). */
export async function findProject(deps: Deps, id: string): Promise<Project | undefined> {
  if (/^-?\d+$/.test(id)) {
    const dbId = toDbId(id);
    return dbId === null ? undefined : findProjectById(deps.db, dbId);
  }
  if (!id.includes('/')) return undefined;
  return findProjectByFullPath(deps.db, id);
}

function checkProjectFields(v: Validation, input: ProjectInput, namespace: Namespace): void {
  if (input.name !== undefined) {
    if (input.name.trim() === '') v.add('name', "can't be blank");
    else if (!isValidProjectName(input.name)) v.add('name', PROJECT_NAME_MESSAGE);
  }
  if (input.path !== undefined) {
    if (input.path === '') v.add('path', "can't be blank");
    else if (!isValidPath(input.path) || isReservedChild(input.path)) v.add('path', PROJECT_PATH_MESSAGE);
  }
  if (input.description && input.description.length > 2000) {
    v.add('description', 'is too long (maximum is 2000 characters)');
  }
  if (
    input.visibility !== undefined &&
    namespace.kind === 'group' &&
    !fitsWithin(input.visibility, namespace.visibility)
  ) {
    v.add('visibility_level', `${input.visibility} is not allowed in a ${namespace.visibility} group.`);
  }
  if (input.default_branch !== undefined && !isValidBranchName(input.default_branch)) {
    v.add('default_branch', 'is invalid');
  }
}

/** Whether a full path is already taken by a project or a namespace (they share one URL space). */
async function fullPathTaken(deps: Deps, fullPath: string, exceptProjectId?: number): Promise<boolean> {
  const project = await findProjectByFullPath(deps.db, fullPath);
  if (project && project.id !== exceptProjectId) return true;
  return (await findNamespaceByFullPath(deps.db, fullPath)) !== undefined;
}

/**
 * Creates a project and its bare repository at the hashed path on a storage picked by weight,
 * optionally with an initial README commit. The creator becomes Owner of a personal project
 * and Maintainer of a group project they do not already maintain.
 */
export async function createProject(deps: Deps, user: User, input: CreateProjectInput, namespace: Namespace) {
  const name = input.name ?? input.path ?? '';
  const path = input.path ?? pathFromName(name);
  const fields: ProjectInput = { ...input, name, path };
  const v = new Validation();
  checkProjectFields(v, fields, namespace);
  if (v.empty && (await fullPathTaken(deps, `${namespace.full_path}/${path}`))) {
    v.add('path', 'has already been taken');
  }
  v.throwIfAny();
  const storage = input.repositoryStorage ?? (await pickStorage(deps.db, deps.storages));
  const defaultBranch = input.default_branch ?? DEFAULT_BRANCH;
  const now = deps.clock.now();
  const features = { ...defaultFeatures(), ...input.features };
  let repoPath: string | undefined;
  try {
    const project = await deps.db.transaction().execute(async (tx) => {
      const project = await insertProject(tx, {
        namespace_id: namespace.id,
        name,
        path,
        full_path: `${namespace.full_path}/${path}`,
        description: input.description ?? '',
        visibility: input.visibility ?? 'private',
        default_branch: defaultBranch,
        creator_id: user.id,
        repository_storage: storage,
        request_access_enabled: input.request_access_enabled ?? true,
        lfs_enabled: input.lfs_enabled ?? true,
        features: JSON.stringify(features),
        topics: JSON.stringify(normaliseTopics(input.topics ?? [])),
        settings: JSON.stringify(input.settings ?? {}),
        created_at: now,
        updated_at: now,
        last_activity_at: now,
      });
      if (namespace.kind === 'user' && namespace.owner_id !== null) {
        await insertMember(tx, {
          source_type: 'project',
          source_id: project.id,
          user_id: namespace.owner_id,
          access_level: AccessLevel.OWNER,
          created_by_id: user.id,
          created_at: now,
          updated_at: now,
        });
      }
      await insertEvent(tx, {
        action: 'created',
        author_id: user.id,
        project_id: project.id,
        target_type: null,
        target_id: null,
        push_data: JSON.stringify(null),
        created_at: now,
      });
      repoPath = deps.storages.repositoryPath(storage, project.id);
      await initBareRepository(repoPath, defaultBranch);
      if (input.initializeWithReadme) {
        await commitFiles(repoPath, {
          branch: defaultBranch,
          parent: null,
          files: [{ path: 'README.md', content: Buffer.from(readmeFor(project)) }],
          message: 'Initial commit',
          author: { name: user.name, email: user.email, date: now },
        });
      }
      return project;
    });
    return project;
  } catch (error) {
    if (repoPath) await removeRepository(repoPath);
    if (pgErrorCode(error) === UNIQUE_VIOLATION) {
      new Validation().add('path', 'has already been taken').throwIfAny();
    }
    throw error;
  }
}

/** The README GitLab writes for `initialize_with_readme`: the project's name and description. */
export function readmeFor(project: Pick<Project, 'name' | 'description'>): string {
  const description = project.description ? `\n${project.description}\n` : '';
  return `# ${project.name}\n${description}`;
}

function normaliseTopics(topics: string[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const raw of topics) {
    const topic = raw.trim();
    if (topic === '' || seen.has(topic.toLowerCase())) continue;
    seen.add(topic.toLowerCase());
    out.push(topic);
  }
  return out;
}

/** Applies a project update. Renaming the path moves the project's URL, not its repository. */
export async function updateProject(deps: Deps, project: Project, input: ProjectInput): Promise<Project> {
  const namespace = await findNamespaceById(deps.db, project.namespace_id);
  if (!namespace) throw notFound('Project');
  const v = new Validation();
  checkProjectFields(v, input, namespace);
  const path = input.path ?? project.path;
  const fullPath = `${namespace.full_path}/${path}`;
  if (v.empty && path !== project.path && (await fullPathTaken(deps, fullPath, project.id))) {
    v.add('path', 'has already been taken');
  }
  v.throwIfAny();
  const changes: Updateable<ProjectsTable> = { updated_at: deps.clock.now() };
  if (input.name !== undefined) changes.name = input.name;
  if (input.path !== undefined) {
    changes.path = input.path;
    changes.full_path = fullPath;
  }
  if (input.description !== undefined) changes.description = input.description ?? '';
  if (input.visibility !== undefined) changes.visibility = input.visibility;
  if (input.default_branch !== undefined) changes.default_branch = input.default_branch;
  if (input.request_access_enabled !== undefined) changes.request_access_enabled = input.request_access_enabled;
  if (input.lfs_enabled !== undefined) changes.lfs_enabled = input.lfs_enabled;
  if (input.archived !== undefined) changes.archived = input.archived;
  if (input.topics !== undefined) changes.topics = JSON.stringify(normaliseTopics(input.topics));
  if (input.features !== undefined) changes.features = JSON.stringify({ ...project.features, ...input.features });
  if (input.settings !== undefined) changes.settings = JSON.stringify({ ...project.settings, ...input.settings });
  try {
    return (await updateProjectRow(deps.db, project.id, changes)) as Project;
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION) new Validation().add('path', 'has already been taken').throwIfAny();
    throw error;
  }
}

/** Deletes a project's rows, then its repository on disk. */
export async function deleteProject(deps: Deps, project: Project): Promise<void> {
  await deps.db.transaction().execute((tx) => deleteProjectRows(tx, project.id));
  await removeRepository(deps.storages.repositoryPath(project.repository_storage, project.id));
}
