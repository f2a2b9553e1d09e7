import { z } from 'zod';
import { BILLABLE_MEMBER_SORTS, countBillableMembers, listBillableMembers } from '../db/queries/billable-members.js';
import { countMembers, findScopeMember, listMembers } from '../db/queries/members.js';
import { findUserById, findUsersByIds } from '../db/queries/users.js';
import type { Member, User } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { recordNotFound } from '../http/errors.js';
import { paginateArray, paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import { checkRateLimit, type RateLimit } from '../http/rate-limit.js';
import type { ApiRouter } from '../http/route.js';
import { isValidDate } from '../lib/clock.js';
import { toDbId } from '../lib/ids.js';
import { MembershipPolicy } from '../policies/members.js';
import { presentBillableMember, presentBillableMembership, presentMember } from '../presenters/member.js';
import {
  billableMemberships,
  checkBillableAccess,
  ensureBillableSnapshot,
  removeBillableMember,
  rootOwnerIds,
} from '../services/billable-members.js';
import { today } from '../services/deps.js';
import { isLdapSynced } from '../services/ldap.js';
import {
  addMembers,
  findDirectMember,
  type MemberTarget,
  memberScope,
  removeMember,
  setOverride,
  sourceRef,
  updateMember,
  usersOfMembers,
} from '../services/members.js';
import { checkUnmodifiedSince, created, currentUser, loadGroup, loadProject, noContent } from './helpers.js';

export type SourceType = 'group' | 'project';
export const SOURCE_TYPES: SourceType[] = ['group', 'project'];

export interface LoadedSource {
  target: MemberTarget;
  policy: MembershipPolicy;
}

/** Loads `:id` as a group or project the caller may see (404 otherwise) with its membership rules. */
export async function loadSource(ctx: AppContext, type: SourceType, id: string): Promise<LoadedSource> {
  if (type === 'group') {
    const { group, policy } = await loadGroup(ctx, id);
    const ldapSynced = await isLdapSynced(ctx.state.deps.db, group.id);
    return { target: { type: 'group', group }, policy: MembershipPolicy.forGroup(policy, group, ldapSynced) };
  }
  const { project, namespace, policy } = await loadProject(ctx, id);
  return {
    target: { type: 'project', project, namespace },
    policy: MembershipPolicy.forProject(policy, project, namespace),
  };
}

/**
 * Grape's DateTime for `expires_at`: a date or a timestamp (its date is kept); an empty value
 * clears the expiry.
 */
const expiresAtParam = () =>
  z.preprocess(
    (v) => (v === '' || v === null ? null : typeof v === 'number' ? String(v) : v),
    z
      .string()
      .refine((s) => {
        const day = s.slice(0, 10);
        return isValidDate(day) && (s.length === 10 || !Number.isNaN(Date.parse(s)));
      })
      .transform((s) => s.slice(0, 10))
      .nullable(),
  );

const listParams = {
  id: p.string(),
  query: p.string().optional(),
  user_ids: p.array(p.intItem()).optional(),
  skip_users: p.array(p.intItem()).optional(),
  show_seat_info: p.bool().optional(),
  ...pagination(),
};

/** GitLab's `members_delete` limit (application setting `members_delete_limit`, 60 a minute), per source and user. */
const MEMBERS_DELETE_RATE_LIMIT: RateLimit = {
  name: 'members_delete',
  threshold: 60,
  periodSeconds: 60,
  message: 'This endpoint has been requested too many times. Try again later.',
};

/** GitLab EE's `state` filter of `members/all`: Depot has no members awaiting a seat. */
const allListParams = { ...listParams, state: p.enum(['awaiting', 'active']).optional() };

const userIdParams = z.object({ id: p.string(), user_id: p.int() });

const addParams = z
  .object({
    id: p.string(),
    access_level: p.int(),
    user_id: p.string().optional(),
    username: p.string().optional(),
    expires_at: expiresAtParam().optional(),
    invite_source: p.string().default('members-api'),
    areas_of_focus: p.array(p.string()).optional(),
  })
  .superRefine((input, ctx) => {
    if (input.user_id !== undefined && input.username !== undefined) {
      ctx.addIssue({ code: 'custom', message: 'user_id, username are mutually exclusive', path: [] });
    } else if (input.user_id === undefined && input.username === undefined) {
      ctx.addIssue({
        code: 'custom',
        message: 'user_id, username are missing, at least one parameter must be provided',
        path: [],
      });
    }
  });

const updateParams = z.object({
  id: p.string(),
  user_id: p.int(),
  access_level: p.int(),
  expires_at: expiresAtParam().optional(),
});

const deleteParams = z.object({
  id: p.string(),
  user_id: p.int(),
  skip_subresources: p.bool().default(false),
  unassign_issuables: p.bool().default(false),
});

/** Members as GitLab's Member entity, with their users and creators. */
async function presentMembers(ctx: AppContext, target: MemberTarget, members: Member[], showSeatInfo = false) {
  const deps = ctx.state.deps;
  const users = await usersOfMembers(deps.db, members);
  const viewer = ctx.state.actor.user;
  const pc = { baseUrl: deps.config.baseUrl };
  return members.flatMap((member) => {
    const user = users.get(member.user_id);
    if (!user) return [];
    return [
      presentMember(
        {
          member,
          user,
          createdBy: member.created_by_id === null ? null : (users.get(member.created_by_id) ?? null),
          showPrivateEmail: viewer?.admin === true,
          groupSource: target.type === 'group',
          showSeatInfo,
        },
        pc,
      ),
    ];
  });
}

async function presentOne(ctx: AppContext, target: MemberTarget, member: Member) {
  const [body] = await presentMembers(ctx, target, [member]);
  return body;
}

function registerSourceRoutes(api: ApiRouter, type: SourceType): void {
  const base = `/${type}s/:id`;
  const label = type === 'group' ? 'group' : 'project';

  const list = (deep: boolean) => async (ctx: AppContext, params: z.output<z.ZodObject<typeof allListParams>>) => {
    const { target, policy } = await loadSource(ctx, type, params.id);
    policy.authorize('read_member');
    const deps = ctx.state.deps;
    const scope = memberScope(target, deep);
    const filter = {
      today: today(deps),
      query: params.query,
      userIds: params.user_ids,
      skipUserIds: deep ? undefined : params.skip_users,
      // Nobody is awaiting a seat in Depot: every listed member is active.
      nobody: params.state === 'awaiting',
    };
    const members = await paginateQuery(
      ctx,
      deps.config.baseUrl,
      params,
      (w) => listMembers(deps.db, scope, filter, w),
      (cap) => countMembers(deps.db, scope, filter, cap),
    );
    ctx.body = await presentMembers(ctx, target, members, params.show_seat_info === true);
  };

  api.get(
    `${base}/members`,
    { summary: `Direct members of a ${label}`, auth: 'required', params: z.object(listParams), tags: ['members'] },
    list(false),
  );
  api.get(
    `${base}/members/all`,
    {
      summary: `Members of a ${label}, inherited ones included`,
      auth: 'required',
      params: z.object(allListParams),
      tags: ['members'],
    },
    list(true),
  );
  api.get(
    `${base}/members/all/:user_id`,
    {
      summary: `A member of a ${label}, inherited or direct`,
      auth: 'required',
      params: userIdParams,
      tags: ['members'],
    },
    async (ctx, params) => {
      const { target, policy } = await loadSource(ctx, type, params.id);
      policy.authorize('read_member');
      const member = await findScopeMember(
        ctx.state.deps.db,
        memberScope(target, true),
        params.user_id,
        today(ctx.state.deps),
      );
      if (!member) throw recordNotFound();
      ctx.body = await presentOne(ctx, target, member);
    },
  );
  api.get(
    `${base}/members/:user_id`,
    { summary: `A direct member of a ${label}`, auth: 'required', params: userIdParams, tags: ['members'] },
    async (ctx, params) => {
      const { target, policy } = await loadSource(ctx, type, params.id);
      policy.authorize('read_member');
      const member = await findDirectMember(ctx.state.deps, target, params.user_id);
      ctx.body = await presentOne(ctx, target, member);
    },
  );
  api.post(
    `${base}/members`,
    { summary: `Add members to a ${label}`, auth: 'required', params: addParams, tags: ['members'] },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const { target, policy } = await loadSource(ctx, type, params.id);
      const result = await addMembers(ctx.state.deps, user, policy, target, {
        userId: params.user_id,
        username: params.username,
        accessLevel: params.access_level,
        expiresAt: params.expires_at ?? null,
        inviteSource: params.invite_source,
      });
      created(ctx, 'single' in result ? await presentOne(ctx, target, result.single) : result.bulk);
    },
  );
  api.put(
    `${base}/members/:user_id`,
    { summary: `Change a member of a ${label}`, auth: 'required', params: updateParams, tags: ['members'] },
    async (ctx, params) => {
      const { target, policy } = await loadSource(ctx, type, params.id);
      const member = await findDirectMember(ctx.state.deps, target, params.user_id);
      const updated = await updateMember(ctx.state.deps, policy, target, member, {
        accessLevel: params.access_level,
        expiresAt: params.expires_at,
      });
      ctx.body = await presentOne(ctx, target, updated);
    },
  );
  api.delete(
    `${base}/members/:user_id`,
    { summary: `Remove a member of a ${label}`, auth: 'required', params: deleteParams, tags: ['members'] },
    async (ctx, params) => {
      const { target, policy } = await loadSource(ctx, type, params.id);
      const member = await findDirectMember(ctx.state.deps, target, params.user_id);
      await checkRateLimit(ctx, MEMBERS_DELETE_RATE_LIMIT, [target.type, sourceRef(target).id, currentUser(ctx).id]);
      checkUnmodifiedSince(ctx, member.updated_at);
      await removeMember(ctx.state.deps, policy, target, member, { skipSubresources: params.skip_subresources });
      noContent(ctx);
    },
  );
}

function registerGroupOnlyRoutes(api: ApiRouter): void {
  const billableListParams = z.object({
    id: p.string(),
    search: p.string().optional(),
    sort: p.enum(BILLABLE_MEMBER_SORTS).optional(),
    ...pagination(),
  });

  api.get(
    '/groups/:id/billable_members',
    {
      summary: 'Billable members of a top-level group',
      auth: 'required',
      params: billableListParams,
      tags: ['members'],
    },
    async (ctx, params) => {
      const { target, policy } = await loadSource(ctx, 'group', params.id);
      if (target.type !== 'group') return;
      const group = target.group;
      checkBillableAccess(group, policy, 'read');
      const deps = ctx.state.deps;
      const refreshedAt = await ensureBillableSnapshot(deps, group);
      ctx.set('X-Billable-Members-Refreshed-At', refreshedAt.toISOString());
      const filter = { search: params.search, sort: params.sort };
      const rows = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => listBillableMembers(deps.db, group.id, filter, w),
        (cap) => countBillableMembers(deps.db, group.id, filter, cap),
      );
      const users = new Map(
        (
          await findUsersByIds(
            deps.db,
            rows.map((r) => r.user_id),
          )
        ).map((u) => [u.id, u]),
      );
      const owners = await rootOwnerIds(deps, group);
      const admin = ctx.state.actor.user?.admin === true;
      const pc = { baseUrl: deps.config.baseUrl };
      ctx.body = rows.flatMap((row) => {
        const user = users.get(row.user_id);
        if (!user) return [];
        return [
          presentBillableMember(
            {
              user,
              membershipType: row.membership_type,
              lastOwner: owners.length === 1 && owners[0] === user.id,
              showPrivateEmail: admin,
            },
            pc,
          ),
        ];
      });
    },
  );

  api.get(
    '/groups/:id/billable_members/:user_id/memberships',
    {
      summary: "A billable member's memberships in the group's hierarchy",
      auth: 'required',
      params: z.object({ id: p.string(), user_id: p.int(), ...pagination() }),
      tags: ['members'],
    },
    async (ctx, params) => {
      const { target, policy } = await loadSource(ctx, 'group', params.id);
      if (target.type !== 'group') return;
      checkBillableAccess(target.group, policy, 'admin');
      const deps = ctx.state.deps;
      const userId = toDbId(params.user_id);
      const user: User | undefined = userId === null ? undefined : await findUserById(deps.db, userId);
      if (!user) throw recordNotFound();
      const memberships = await billableMemberships(deps, target.group, user);
      ctx.body = paginateArray(ctx, deps.config.baseUrl, params, memberships).map(presentBillableMembership);
    },
  );

  api.delete(
    '/groups/:id/billable_members/:user_id',
    {
      summary: 'Remove a billable member from a group, its subgroups and projects',
      auth: 'required',
      params: userIdParams,
      tags: ['members'],
    },
    async (ctx, params) => {
      const { target, policy } = await loadSource(ctx, 'group', params.id);
      if (target.type !== 'group') return;
      const userId = toDbId(params.user_id) ?? 0;
      await removeBillableMember(ctx.state.deps, target.group, policy, userId);
      noContent(ctx);
    },
  );

  const override = (value: boolean) => async (ctx: AppContext, params: z.output<typeof userIdParams>) => {
    const { target, policy } = await loadSource(ctx, 'group', params.id);
    policy.authorize('override_members');
    const member = await findDirectMember(ctx.state.deps, target, params.user_id);
    const updated = await setOverride(ctx.state.deps, policy, target, member, value);
    return presentOne(ctx, target, updated);
  };
  api.post(
    '/groups/:id/members/:user_id/override',
    {
      summary: 'Override the LDAP access level of a member',
      auth: 'required',
      params: userIdParams,
      tags: ['members'],
    },
    async (ctx, params) => {
      created(ctx, await override(true)(ctx, params));
    },
  );
  api.delete(
    '/groups/:id/members/:user_id/override',
    { summary: 'Remove the LDAP override of a member', auth: 'required', params: userIdParams, tags: ['members'] },
    async (ctx, params) => {
      ctx.body = await override(false)(ctx, params);
    },
  );
}

/** Members, billable members and LDAP overrides of groups and projects. */
export function registerMemberRoutes(api: ApiRouter): void {
  // Literal paths (`all`, `override`) before `:user_id`, so they are not read as a user id.
  registerGroupOnlyRoutes(api);
  for (const type of SOURCE_TYPES) registerSourceRoutes(api, type);
}
