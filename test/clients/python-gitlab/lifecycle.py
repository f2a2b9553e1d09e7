"""The user lifecycle as admin scripts drive it: block, deactivate, ban, impersonation tokens,
memberships and deletion. The test made `sleeper`, a user dormant for long enough to deactivate."""

import gitlab
from depot import connect, error_of, report

gl = connect()
out = {}

linus = gl.users.create(
    {
        "username": "linus",
        "email": "linus@example.com",
        "name": "Linus Pauling",
        "password": "a long enough password, truly",
        "skip_confirmation": True,
    }
)
own = linus.personal_access_tokens.create({"name": "own", "scopes": ["api"]})
as_linus = connect(own.token)
as_linus.auth()
out["before"] = as_linus.user.username

# Block: the token stops working at once; blocking again answers nothing; unblock restores.
out["block"] = [linus.block(), linus.state]
out["blocked_token"] = error_of(lambda: connect(own.token).auth())
out["block_again"] = gl.users.get(linus.id).block()
out["unblock"] = [linus.unblock(), linus.state]
as_linus = connect(own.token)
as_linus.auth()
out["after_unblock"] = as_linus.user.username

# Deactivate: refused for a user active today, done for a dormant one; activate undoes it.
out["deactivate_recent"] = error_of(lambda: linus.deactivate())
sleeper = gl.users.list(username="sleeper", get_all=True)[0]
out["deactivate"] = [sleeper.deactivate(), sleeper.state, gl.users.get(sleeper.id).state]
out["activate"] = [sleeper.activate(), gl.users.get(sleeper.id).state]

# Ban and unban.
out["ban"] = [linus.ban(), gl.users.get(linus.id).state]
out["banned_token"] = error_of(lambda: connect(own.token).auth())
out["ban_again"] = error_of(lambda: linus.ban())
out["unban"] = [linus.unban(), gl.users.get(linus.id).state]

# Impersonation tokens act as the user and are listed apart from personal access tokens.
imp = linus.impersonationtokens.create({"name": "support", "scopes": ["api", "read_user"]})
as_support = connect(imp.token)
as_support.auth()
out["impersonation"] = [imp.impersonation, imp.active, imp.scopes, as_support.user.username]
out["impersonation_list"] = [t.name for t in linus.impersonationtokens.list(get_all=True)]
out["impersonation_get"] = linus.impersonationtokens.get(imp.id).name
linus.impersonationtokens.delete(imp.id)
out["impersonation_revoked"] = error_of(lambda: connect(imp.token).auth())
out["impersonation_inactive"] = [
    [t.name, t.revoked] for t in linus.impersonationtokens.list(state="inactive", get_all=True)
]

# Memberships.
group = gl.groups.create({"name": "Chemists", "path": "chemists"})
project = gl.projects.create({"name": "bonds", "namespace_id": group.id})
group.members.create({"user_id": linus.id, "access_level": gitlab.const.REPORTER_ACCESS})
project.members.create({"user_id": linus.id, "access_level": gitlab.const.DEVELOPER_ACCESS})
out["memberships"] = sorted(
    [m.source_type, m.source_name, m.access_level] for m in linus.memberships.list(get_all=True)
)
out["memberships_projects"] = [m.source_name for m in linus.memberships.list(type="Project", get_all=True)]

# Deletion: gone at once for the API; the job does the rest.
gl.users.delete(linus.id)
out["deleted"] = error_of(lambda: gl.users.get(linus.id))
out["deleted_token"] = error_of(lambda: connect(own.token).auth())

report(out)
