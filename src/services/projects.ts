import type { Updateable } from 'kysely';
import { pgErrorCode, UNIQUE_VIOLATION } from '../db/database.js';
import { insertEvent } from '../db/queries/events.js';
import { insertMember } from '../db/queries/members.js';
import { findNamespaceByFullPath, findNamespaceById, findNamespacesByIds } from '../db/queries/namespaces.js';
import {
  countPersonalProjects,
  deleteProject as deleteProjectRows,
  findProjectByFullPath,
  findProjectById,
  findProjectByName,
  findProjectWithNamespace,
  insertProject,
  updateProject as updateProjectRow,
} from '../db/queries/projects.js';
import type { Namespace, Project, ProjectFeatures, ProjectsTable, User, Visibility } from '../db/schema.js';
import { evictRepository } from '../git/catfile.js';
import { readBranchTip, setHeadBranch } from '../git/repo-info.js';
import { initBareRepository, removeRepository } from '../git/repository.js';
import { isValidBranchName } from '../git/validate.js';
import { commitFiles } from '../git/write.js';
import { notFound, validationError } from '../http/errors.js';
import { purgeCachedArchivesLater } from '../jobs/archive-cache.js';
import { purgeProjectEventsLater } from '../jobs/events.js';
import { toDbId } from '../lib/ids.js';
import { transliterate } from '../lib/transliterate.js';
import { AccessLevel } from '../policies/access-levels.js';
import { DefaultBranchProtection } from '../policies/branch-protection.js';
import { pickStorage } from '../storage/placement.js';
import { getApplicationSettings } from './application-settings.js';
import { cachedLookup, type Deps } from './deps.js';
import { Validation } from './errors.js';
import {
  isReservedChild,
  isValidPath,
  isValidProjectName,
  PROJECT_NAME_MESSAGE,
  PROJECT_PATH_MESSAGE,
} from './paths.js';
import { protectDefaultBranch } from './protected-branches.js';
import { firstBranchPushData } from './push-events.js';
import { cappedBy, fitsWithin, restrictedVisibilityMessage, visibilityAllowedFor } from './visibility.js';
import { withWriteLease } from './write-leases.js';

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
  group_runners_enabled?: boolean;
  auto_devops_deploy_strategy?: string;
  auto_cancel_pending_pipelines?: string;
  build_git_strategy?: string;
  resolve_outdated_diff_discussions?: boolean;
  enforce_auth_checks_on_uploads?: boolean;
  warn_about_potentially_unwanted_characters?: boolean;
  public_jobs?: boolean;
  keep_latest_artifact?: boolean;
  ci_forward_deployment_enabled?: boolean;
  ci_forward_deployment_rollback_allowed?: boolean;
  ci_allow_fork_pipelines_to_run_in_parent_project?: boolean;
  ci_separated_caches?: boolean;
  restrict_user_defined_variables?: boolean;
  ci_push_repository_for_job_token_allowed?: boolean;
  ci_id_token_sub_claim_components?: string[];
  ci_delete_pipelines_in_seconds?: number;
  ci_pipeline_variables_minimum_override_role?: string;
  max_artifacts_size?: number;
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

/** What `:id` names: a numeric id or a full path; null for a bare name without a slash. */
function projectKey(id: string): { id: number } | { fullPath: string } | null {
  if (/^-?\d+$/.test(id)) {
    const dbId = toDbId(id);
    return dbId === null ? null : { id: dbId };
  }
  return id.includes('/') ? { fullPath: id } : null;
}

/** Looks up a project by numeric id or full path (a bare name without a slash is not found). */
export async function findProject(deps: Deps, id: string): Promise<Project | undefined> {
  const key = projectKey(id);
  if (!key) return undefined;
  return 'id' in key ? findProjectById(deps.db, key.id) : findProjectByFullPath(deps.db, key.fullPath);
}

/** Like findProject, with the project's namespace, in one query (or none: `deps.lookups`). */
export async function findProjectAndNamespace(
  deps: Deps,
  id: string,
): Promise<{ project: Project; namespace: Namespace } | undefined> {
  const key = projectKey(id);
  if (!key) return undefined;
  // Paths are found case-insensitively, as GitLab finds them.
  const name = 'id' in key ? `#${key.id}` : key.fullPath.toLowerCase();
  return cachedLookup(deps, 'project', name, () => findProjectWithNamespace(deps.db, key));
}

/** Longest name or path GitLab accepts. */
const NAME_MAX_CHARS = 255;
const DESCRIPTION_MAX_CHARS = 2000;
const TAKEN = 'has already been taken';

/**
 * Checks names, paths and the rest of a project's own fields, in the order GitLab's model
 * reports them. A taken name is reported first under `project_namespace.name`, as GitLab
 * validates the project's namespace record before the project itself.
 */
function checkProjectFields(
  v: Validation,
  input: ProjectInput,
  namespace: Namespace,
  taken: { name: boolean; path: boolean },
): void {
  if (taken.name) v.add('project_namespace.name', TAKEN);
  if (input.name !== undefined) {
    if (input.name.trim() === '') v.add('name', "can't be blank");
    else if (input.name.length > NAME_MAX_CHARS) v.add('name', `is too long (maximum is ${NAME_MAX_CHARS} characters)`);
    else if (!isValidProjectName(input.name)) v.add('name', PROJECT_NAME_MESSAGE);
    if (taken.name) v.add('name', TAKEN);
  }
  if (input.path !== undefined) {
    if (input.path === '') v.add('path', "can't be blank");
    else if (input.path.length > NAME_MAX_CHARS) v.add('path', `is too long (maximum is ${NAME_MAX_CHARS} characters)`);
    else if (!isValidPath(input.path) || isReservedChild(input.path)) v.add('path', PROJECT_PATH_MESSAGE);
    if (taken.path) v.add('path', TAKEN);
  }
  if (input.description && input.description.length > DESCRIPTION_MAX_CHARS) {
    v.add('description', `is too long (maximum is ${DESCRIPTION_MAX_CHARS} characters)`);
  }
  if (
    input.visibility !== undefined &&
    namespace.kind === 'group' &&
    !fitsWithin(input.visibility, namespace.visibility)
  ) {
    v.add('visibility_level', `${input.visibility} is not allowed in a ${namespace.visibility} group.`);
  }
}

/** Whether a full path is already taken by another project or a namespace (one URL space). */
async function fullPathTaken(deps: Deps, fullPath: string, exceptProjectId?: number): Promise<boolean> {
  const project = await findProjectByFullPath(deps.db, fullPath);
  if (project && project.id !== exceptProjectId) return true;
  return (await findNamespaceByFullPath(deps.db, fullPath)) !== undefined;
}

/** Whether another project in the namespace has exactly this name (GitLab compares case-sensitively). */
async function nameTaken(deps: Deps, namespaceId: number, name: string, exceptProjectId?: number) {
  const other = await findProjectByName(deps.db, namespaceId, name);
  return other !== undefined && other.id !== exceptProjectId;
}

/**
 * Rails' `String#parameterize`: transliterate to ASCII, turn every run of characters other than
 * letters, digits, `-` and `_` into one `-`, trim dashes at the ends, lower-case.
 */
export function parameterize(text: string): string {
  return transliterate(text)
    .replace(/[^a-z0-9_-]+/gi, '-')
    .replace(/-{2,}/g, '-')
    .replace(/^-|-$/g, '')
    .toLowerCase();
}

/**
 * GitLab's `set_project_name_from_path`: a missing name is the path; a missing path is the name,
 * parameterized only when the name is not already a valid path.
 */
function nameAndPath(input: ProjectInput): { name: string; path: string } {
  const name = input.name?.trim() ? input.name : undefined;
  const path = input.path ? input.path : undefined;
  if (name !== undefined && path !== undefined) return { name, path };
  if (path !== undefined) return { name: path, path };
  if (name !== undefined) return { name, path: isValidPath(name) ? name : parameterize(name) };
  return { name: input.name ?? '', path: input.path ?? '' };
}

/**
 * The branch a new project starts on when none is asked for: the nearest group's default branch
 * setting (the group first, then its ancestors), else the instance's `default_branch_name`, else
 * `main` (GitLab's Gitlab::DefaultBranch).
 */
async function namespaceDefaultBranch(
  deps: Deps,
  namespace: Namespace,
  instanceDefault: string | null,
): Promise<string> {
  const fallback = instanceDefault ? instanceDefault : DEFAULT_BRANCH;
  if (namespace.kind !== 'group') return fallback;
  const chain = new Map((await findNamespacesByIds(deps.db, namespace.traversal_ids)).map((ns) => [ns.id, ns]));
  for (const id of [...namespace.traversal_ids].reverse()) {
    const branch = chain.get(id)?.default_branch;
    if (branch) return branch;
  }
  return fallback;
}

/**
 * GitLab's `check_personal_projects_limit`: a project in a personal namespace counts against its
 * creator's `projects_limit` (administrators included), reported on `limit_reached`.
 */
async function checkPersonalProjectsLimit(deps: Deps, creator: User): Promise<void> {
  const limit = creator.projects_limit;
  if (limit > 0 && (await countPersonalProjects(deps.db, creator.id)) < limit) return;
  new Validation()
    .add(
      'limit_reached',
      limit === 0
        ? 'Personal project creation is not allowed. Please contact your administrator with questions'
        : `Your project limit is ${limit} projects! Please contact your administrator to increase it`,
    )
    .throwIfAny();
}

/**
 * Creates a project and its bare repository at the hashed path on a storage picked by weight,
 * optionally with an initial README commit. In a personal namespace the namespace owner becomes
 * an Owner member; in a group no membership is created (access comes from the group).
 */
export async function createProject(deps: Deps, user: User, input: CreateProjectInput, namespace: Namespace) {
  const { name, path } = nameAndPath(input);
  const settings = (await getApplicationSettings(deps)).values;
  // Without a visibility the instance default applies, lowered to what the group allows.
  const defaultVisibility = settings.default_project_visibility as Visibility;
  const visibility =
    input.visibility ??
    (namespace.kind === 'group' ? cappedBy(defaultVisibility, namespace.visibility) : defaultVisibility);
  // GitLab's create service refuses a restricted level before the model validates anything else.
  if (!visibilityAllowedFor(user, visibility, settings.restricted_visibility_levels as string[])) {
    throw validationError({ visibility_level: [restrictedVisibilityMessage(visibility)] });
  }
  // Then the personal projects limit, alone, before the model's own validations (as GitLab).
  if (namespace.kind === 'user') await checkPersonalProjectsLimit(deps, user);
  const fields: ProjectInput = { ...input, name, path };
  const v = new Validation();
  const taken = {
    name: name.trim() !== '' && (await nameTaken(deps, namespace.id, name)),
    path: path !== '' && (await fullPathTaken(deps, `${namespace.full_path}/${path}`)),
  };
  checkProjectFields(v, fields, namespace, taken);
  v.throwIfAny();
  // GitLab uses `default_branch.presence`; a name git refuses fails the repository creation,
  // reported twice on `base` (once by the repository, once by the service that raised).
  const defaultBranch = input.default_branch
    ? input.default_branch
    : await namespaceDefaultBranch(deps, namespace, settings.default_branch_name as string | null);
  if (!isValidBranchName(defaultBranch)) {
    throw validationError({ base: ['Failed to create repository', 'Failed to create repository'] });
  }
  const storage = input.repositoryStorage ?? (await pickStorage(deps));
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
        // GitLab leaves the description null when none is given.
        description: input.description ?? null,
        visibility,
        default_branch: defaultBranch,
        // GitLab protects the default branch as the instance says when the project is created.
        default_branch_protection: Number(settings.default_branch_protection ?? DefaultBranchProtection.full),
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
      // GitLab's ProtectDefaultBranchService, as the project's default_branch_protection says.
      await protectDefaultBranch(tx, project, defaultBranch, now);
      repoPath = deps.storages.repositoryPath(storage, project.id);
      await initBareRepository(repoPath, defaultBranch);
      if (input.initializeWithReadme) {
        const message = 'Initial commit';
        const commitId = await commitFiles(repoPath, {
          branch: defaultBranch,
          parent: null,
          files: [{ path: 'README.md', content: Buffer.from(readmeFor(project)) }],
          message,
          author: { name: user.name, email: user.email, date: now },
        });
        // GitLab writes the README through its hooks: the new branch is a push like any other.
        await insertEvent(tx, {
          action: 'pushed',
          author_id: user.id,
          project_id: project.id,
          target_type: null,
          target_id: null,
          push_data: firstBranchPushData(defaultBranch, commitId, 1, message),
          created_at: now,
        });
      }
      return project;
    });
    return project;
  } catch (error) {
    if (repoPath) await removeRepository(repoPath);
    if (pgErrorCode(error) === UNIQUE_VIOLATION) {
      new Validation().add('path', TAKEN).throwIfAny();
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

/**
 * Applies a project update. Renaming the path moves the project's URL, not its repository. A new
 * default branch must exist; it becomes the repository's HEAD.
 */
export async function updateProject(
  deps: Deps,
  project: Project,
  input: ProjectInput,
  actor: Pick<User, 'admin'>,
): Promise<Project> {
  const namespace = await findNamespaceById(deps.db, project.namespace_id);
  if (!namespace) throw notFound('Project');
  // GitLab's valid_visibility_level_change?: only a change to a restricted level is refused.
  if (input.visibility !== undefined && input.visibility !== project.visibility) {
    const restricted = (await getApplicationSettings(deps)).values.restricted_visibility_levels as string[];
    if (!visibilityAllowedFor(actor, input.visibility, restricted)) {
      throw validationError({ visibility_level: [restrictedVisibilityMessage(input.visibility)] });
    }
  }
  const repoPath = deps.storages.repositoryPath(project.repository_storage, project.id);
  // GitLab checks the default branch before the model, and stops there when it cannot move HEAD.
  const newBranch =
    input.default_branch !== undefined && input.default_branch !== project.default_branch
      ? input.default_branch
      : undefined;
  if (newBranch !== undefined && (await readBranchTip(repoPath, newBranch)) === null) {
    throw validationError({ base: [`Could not change HEAD: branch '${newBranch}' does not exist`] });
  }
  const v = new Validation();
  const path = input.path ?? project.path;
  const fullPath = `${namespace.full_path}/${path}`;
  const taken = {
    name:
      input.name !== undefined &&
      input.name !== project.name &&
      input.name.trim() !== '' &&
      (await nameTaken(deps, namespace.id, input.name, project.id)),
    path:
      input.path !== undefined &&
      input.path !== '' &&
      path.toLowerCase() !== project.path.toLowerCase() &&
      (await fullPathTaken(deps, fullPath, project.id)),
  };
  checkProjectFields(v, input, namespace, taken);
  v.throwIfAny();
  const changes: Updateable<ProjectsTable> = { updated_at: deps.clock.now() };
  if (input.name !== undefined) changes.name = input.name;
  if (input.path !== undefined) {
    changes.path = input.path;
    changes.full_path = fullPath;
  }
  if (input.description !== undefined) changes.description = input.description ?? '';
  if (input.visibility !== undefined) changes.visibility = input.visibility;
  if (newBranch !== undefined) changes.default_branch = newBranch;
  if (input.request_access_enabled !== undefined) changes.request_access_enabled = input.request_access_enabled;
  if (input.lfs_enabled !== undefined) changes.lfs_enabled = input.lfs_enabled;
  if (input.archived !== undefined) changes.archived = input.archived;
  if (input.topics !== undefined) changes.topics = JSON.stringify(normaliseTopics(input.topics));
  if (input.features !== undefined) changes.features = JSON.stringify({ ...project.features, ...input.features });
  if (input.settings !== undefined) changes.settings = JSON.stringify({ ...project.settings, ...input.settings });
  const update = async (): Promise<Project> => {
    let updated: Project;
    try {
      updated = (await updateProjectRow(deps.db, project.id, changes)) as Project;
    } catch (error) {
      if (pgErrorCode(error) === UNIQUE_VIOLATION) new Validation().add('path', TAKEN).throwIfAny();
      throw error;
    }
    if (newBranch !== undefined) await setHeadBranch(repoPath, newBranch);
    return updated;
  };
  // Moving HEAD writes the repository: under a write lease, refused while a storage move holds it.
  return newBranch === undefined ? update() : withWriteLease(deps, project, 'api', update);
}

/** Deletes a project's rows, then its repository on disk; its cached archives go in a job. */
export async function deleteProject(deps: Deps, project: Project): Promise<void> {
  await deps.db.transaction().execute(async (tx) => {
    await deleteProjectRows(tx, project.id);
    await purgeCachedArchivesLater(tx, [project.id]);
    await purgeProjectEventsLater(tx, [project.id]);
  });
  const repoPath = deps.storages.repositoryPath(project.repository_storage, project.id);
  evictRepository(repoPath);
  await removeRepository(repoPath);
}
