import { createHash } from 'node:crypto';
import type { User } from '../db/schema.js';
import { isoTime } from '../lib/clock.js';

/** What presenters need to know about the request: where links point. */
export interface PresentContext {
  baseUrl: string;
}

/** Gravatar URL as GitLab builds it when no avatar was uploaded. */
export function avatarUrl(email: string): string {
  const hash = createHash('sha256').update(email.trim().toLowerCase()).digest('hex');
  return `https://www.gravatar.com/avatar/${hash}?s=80&d=identicon`;
}

/** GitLab's UserBasic entity. */
export function presentUserBasic(user: User, pc: PresentContext) {
  return {
    id: user.id,
    username: user.username,
    name: user.name,
    state: user.state,
    locked: false,
    avatar_url: avatarUrl(user.email),
    web_url: `${pc.baseUrl}/${user.username}`,
  };
}

/**
 * GitLab's User entity: UserBasic plus the profile. `canReadProfile` is false for private
 * profiles seen by others: GitLab then leaves out `created_at`, `followers`, `following` and
 * `is_followed` (the keys are absent, not null).
 */
export function presentUser(user: User, pc: PresentContext, canReadProfile: boolean) {
  const workInformation = [user.job_title, user.organization].filter((s) => s && s !== '').join(' at ') || null;
  return {
    ...presentUserBasic(user, pc),
    ...(canReadProfile ? { created_at: isoTime(user.created_at) } : {}),
    bio: user.bio,
    location: user.location,
    public_email: user.public_email,
    skype: user.skype,
    linkedin: user.linkedin,
    twitter: user.twitter,
    discord: user.discord,
    website_url: user.website_url,
    organization: user.organization,
    job_title: user.job_title,
    pronouns: user.pronouns,
    bot: user.bot,
    work_information: workInformation,
    ...(canReadProfile ? { followers: 0, following: 0, is_followed: false } : {}),
    local_time: null,
  };
}

/** GitLab's UserPublic entity: what a user sees of themselves. */
export function presentUserPublic(user: User, pc: PresentContext) {
  return {
    ...presentUser(user, pc, true),
    last_sign_in_at: isoTime(user.last_sign_in_at),
    confirmed_at: isoTime(user.confirmed_at),
    last_activity_on: user.last_activity_on,
    email: user.email,
    theme_id: user.theme_id,
    color_scheme_id: user.color_scheme_id,
    projects_limit: user.projects_limit,
    current_sign_in_at: isoTime(user.current_sign_in_at),
    identities: [],
    can_create_group: user.can_create_group,
    can_create_project: user.projects_limit > 0,
    two_factor_enabled: user.two_factor_enabled,
    external: user.external,
    private_profile: user.private_profile,
    commit_email: user.email,
    preferred_language: 'en',
  };
}

/** GitLab's UserWithAdmin entity: UserPublic plus what administrators see. */
export function presentUserWithAdmin(
  user: User,
  pc: PresentContext,
  extra: { namespaceId: number | null; createdBy: User | null },
) {
  return {
    ...presentUserPublic(user, pc),
    is_admin: user.admin,
    note: user.note,
    namespace_id: extra.namespaceId,
    created_by: extra.createdBy ? presentUserBasic(extra.createdBy, pc) : null,
  };
}

/** GitLab's UserDetailsWithAdmin entity (GET /users/:id for administrators). */
export function presentUserDetailsWithAdmin(
  user: User,
  pc: PresentContext,
  extra: { namespaceId: number | null; createdBy: User | null; highestRole: number },
) {
  return {
    ...presentUserWithAdmin(user, pc, extra),
    highest_role: extra.highestRole,
    current_sign_in_ip: null,
    last_sign_in_ip: null,
    sign_in_count: 0,
  };
}
