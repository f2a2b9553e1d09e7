import type { Namespace, Project, User } from '../db/schema.js';
import type { RepositoryInfo } from '../git/repo-info.js';
import { isoTime } from '../lib/clock.js';
import type { ProjectSettings } from '../services/projects.js';
import { presentNamespaceBasic } from './namespace.js';
import { type PresentContext, presentUserBasic } from './user.js';

/** Everything a project response needs, gathered by the caller (services/project-views.ts). */
export interface ProjectView {
  project: Project;
  namespace: Namespace;
  /** `Group / Sub` or the owner's name: the human path of the namespace. */
  namespaceFullName: string;
  /** The namespace owner, for projects in a personal namespace. */
  owner: User | null;
  repository: RepositoryInfo;
  /** Decisions about the viewer, made by the policy module. */
  canReadCode: boolean;
  canAdminProject: boolean;
  canSeeStorage: boolean;
  /** The runner registration token, for viewers who administer the project (`runners_token`). */
  runnersToken?: string | undefined;
  /** The viewer's direct project level and highest group level (ProjectWithAccess). */
  permissions?: { projectAccess: number | null; groupAccess: number | null };
}

/** GitLab's ProjectIdentity entity. */
export function presentProjectIdentity(project: Project, namespaceFullName: string) {
  return {
    id: project.id,
    description: project.description,
    name: project.name,
    name_with_namespace: `${namespaceFullName} / ${project.name}`,
    path: project.path,
    path_with_namespace: project.full_path,
    created_at: isoTime(project.created_at),
  };
}

/** GitLab's BasicProjectDetails entity (lists for anonymous callers, `simple=true`). */
export function presentBasicProject(view: ProjectView, pc: PresentContext) {
  const { project } = view;
  const webUrl = `${pc.baseUrl}/${project.full_path}`;
  const host = new URL(pc.baseUrl).hostname;
  const topics = [...project.topics].sort();
  return {
    ...presentProjectIdentity(project, view.namespaceFullName),
    ...(view.canReadCode ? { default_branch: project.default_branch ?? 'main' } : {}),
    tag_list: topics,
    topics,
    ssh_url_to_repo: `git@${host}:${project.full_path}.git`,
    http_url_to_repo: `${webUrl}.git`,
    web_url: webUrl,
    ...(view.canReadCode
      ? {
          readme_url: view.repository.readme
            ? `${webUrl}/-/blob/${project.default_branch ?? 'main'}/${view.repository.readme}`
            : null,
          forks_count: 0,
        }
      : {}),
    avatar_url: null,
    star_count: 0,
    last_activity_at: isoTime(project.last_activity_at),
    visibility: project.visibility,
    namespace: presentNamespaceBasic(view.namespace, pc),
    ...(view.canSeeStorage ? { repository_storage: project.repository_storage } : {}),
  };
}

const enabled = (level: string) => level !== 'disabled';

export interface ProjectOptions {
  /**
   * GitLab's `user_can_admin_project` option: single-project responses (GET, POST, PUT) pass it
   * and then show `import_error` to maintainers; lists do not.
   */
  withImportError?: boolean;
}

/** GitLab's Project entity. */
export function presentProject(view: ProjectView, pc: PresentContext, options: ProjectOptions = {}) {
  const { project } = view;
  const f = project.features;
  const s = project.settings as ProjectSettings;
  const api = `${pc.baseUrl}/api/v4/projects/${project.id}`;
  return {
    ...presentBasicProject(view, pc),
    _links: {
      self: api,
      ...(enabled(f.issues) ? { issues: `${api}/issues` } : {}),
      ...(enabled(f.merge_requests) ? { merge_requests: `${api}/merge_requests` } : {}),
      repo_branches: `${api}/repository/branches`,
      labels: `${api}/labels`,
      events: `${api}/events`,
      members: `${api}/members`,
      cluster_agents: `${api}/cluster_agents`,
    },
    packages_enabled: s.packages_enabled ?? true,
    empty_repo: view.repository.empty,
    archived: project.archived,
    ...(view.owner ? { owner: presentUserBasic(view.owner, pc) } : {}),
    resolve_outdated_diff_discussions: s.resolve_outdated_diff_discussions ?? false,
    repository_object_format: 'sha1',
    issues_enabled: enabled(f.issues),
    merge_requests_enabled: enabled(f.merge_requests),
    wiki_enabled: enabled(f.wiki),
    jobs_enabled: enabled(f.builds),
    snippets_enabled: enabled(f.snippets),
    container_registry_enabled: enabled(f.container_registry),
    service_desk_enabled: s.service_desk_enabled ?? false,
    can_create_merge_request_in: view.canReadCode,
    issues_access_level: f.issues,
    repository_access_level: f.repository,
    merge_requests_access_level: f.merge_requests,
    forking_access_level: f.forking,
    wiki_access_level: f.wiki,
    builds_access_level: f.builds,
    snippets_access_level: f.snippets,
    pages_access_level: f.pages,
    analytics_access_level: f.analytics,
    container_registry_access_level: f.container_registry,
    security_and_compliance_access_level: f.security_and_compliance,
    releases_access_level: f.releases,
    environments_access_level: f.environments,
    feature_flags_access_level: f.feature_flags,
    infrastructure_access_level: f.infrastructure,
    monitor_access_level: f.monitor,
    model_experiments_access_level: f.model_experiments,
    model_registry_access_level: f.model_registry,
    emails_disabled: !(s.emails_enabled ?? true),
    emails_enabled: s.emails_enabled ?? true,
    shared_runners_enabled: s.shared_runners_enabled ?? true,
    lfs_enabled: project.lfs_enabled,
    creator_id: project.creator_id,
    ...(view.canAdminProject ? { import_url: null, import_type: null } : {}),
    import_status: 'none',
    ...(view.canAdminProject && options.withImportError ? { import_error: null } : {}),
    ...(enabled(f.issues) ? { open_issues_count: 0 } : {}),
    description_html: project.description ?? '',
    updated_at: isoTime(project.updated_at),
    ...(view.canAdminProject
      ? {
          ci_default_git_depth: s.ci_default_git_depth ?? 20,
          ci_delete_pipelines_in_seconds: s.ci_delete_pipelines_in_seconds ?? null,
          ci_forward_deployment_enabled: s.ci_forward_deployment_enabled ?? true,
          ci_forward_deployment_rollback_allowed: s.ci_forward_deployment_rollback_allowed ?? true,
          ci_job_token_scope_enabled: false,
          ci_separated_caches: s.ci_separated_caches ?? true,
          ci_allow_fork_pipelines_to_run_in_parent_project: s.ci_allow_fork_pipelines_to_run_in_parent_project ?? true,
          ci_id_token_sub_claim_components: s.ci_id_token_sub_claim_components ?? ['project_path', 'ref_type', 'ref'],
          build_git_strategy: s.build_git_strategy ?? 'fetch',
          keep_latest_artifact: s.keep_latest_artifact ?? true,
          restrict_user_defined_variables: s.restrict_user_defined_variables ?? false,
          ci_pipeline_variables_minimum_override_role: s.ci_pipeline_variables_minimum_override_role ?? 'developer',
          ...(view.runnersToken !== undefined ? { runners_token: view.runnersToken } : {}),
          runner_token_expiration_interval: null,
          group_runners_enabled: s.group_runners_enabled ?? true,
          auto_cancel_pending_pipelines: s.auto_cancel_pending_pipelines ?? 'enabled',
          build_timeout: s.build_timeout ?? 3600,
          auto_devops_enabled: s.auto_devops_enabled ?? false,
          auto_devops_deploy_strategy: s.auto_devops_deploy_strategy ?? 'continuous',
          ci_push_repository_for_job_token_allowed: s.ci_push_repository_for_job_token_allowed ?? false,
        }
      : {}),
    ...(view.canReadCode ? { ci_config_path: s.ci_config_path ?? null } : {}),
    public_jobs: s.public_jobs ?? true,
    shared_with_groups: [],
    only_allow_merge_if_pipeline_succeeds: s.only_allow_merge_if_pipeline_succeeds ?? false,
    allow_merge_on_skipped_pipeline: s.allow_merge_on_skipped_pipeline ?? null,
    request_access_enabled: project.request_access_enabled,
    only_allow_merge_if_all_discussions_are_resolved: s.only_allow_merge_if_all_discussions_are_resolved ?? false,
    remove_source_branch_after_merge: s.remove_source_branch_after_merge ?? true,
    printing_merge_request_link_enabled: s.printing_merge_request_link_enabled ?? true,
    merge_method: s.merge_method ?? 'merge',
    squash_option: s.squash_option ?? 'default_off',
    enforce_auth_checks_on_uploads: s.enforce_auth_checks_on_uploads ?? true,
    suggestion_commit_message: s.suggestion_commit_message ?? null,
    merge_commit_template: s.merge_commit_template ?? null,
    squash_commit_template: s.squash_commit_template ?? null,
    issue_branch_template: s.issue_branch_template ?? null,
    warn_about_potentially_unwanted_characters: s.warn_about_potentially_unwanted_characters ?? true,
    autoclose_referenced_issues: s.autoclose_referenced_issues ?? true,
    max_artifacts_size: s.max_artifacts_size ?? null,
  };
}

/** GitLab's ProjectWithAccess entity: Project plus the viewer's permissions. */
export function presentProjectWithAccess(view: ProjectView, pc: PresentContext, options: ProjectOptions = {}) {
  const access = (level: number | null | undefined) => (level ? { access_level: level, notification_level: 3 } : null);
  return {
    ...presentProject(view, pc, options),
    permissions: {
      project_access: access(view.permissions?.projectAccess),
      group_access: access(view.permissions?.groupAccess),
    },
  };
}
