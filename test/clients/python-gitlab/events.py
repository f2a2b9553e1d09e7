"""Activity feeds as scripts read them: the user's events, a project's and another user's."""

import datetime

import gitlab
from depot import connect, error_of, report

gl = connect()
gl.auth()
out = {}

lin = gl.users.create(
    {"username": "lin", "email": "lin@example.com", "name": "Lin", "force_random_password": True}
)
lin_token = lin.personal_access_tokens.create({"name": "feeds", "scopes": ["api"]}).token
lin_read_user = lin.personal_access_tokens.create({"name": "profile", "scopes": ["read_user"]}).token

project = gl.projects.create({"name": "journal", "visibility": "private", "initialize_with_readme": True})
project.members.create({"user_id": lin.id, "access_level": gitlab.const.DEVELOPER_ACCESS})
as_lin = connect(lin_token)
as_lin.projects.get(project.id).commits.create(
    {
        "branch": "notes",
        "start_branch": "main",
        "commit_message": "Add notes",
        "actions": [{"action": "create", "file_path": "notes.md", "content": "hello\n"}],
    }
)

mine = gl.events.list(get_all=True)
# Other flows may have run first as the same administrator: look at this project's part.
out["mine"] = [e.action_name for e in mine if e.project_id == project.id]
out["mine_newest_first"] = mine[0].project_id == project.id
feed = project.events.list(get_all=True)
out["project"] = [[e.action_name, e.author_username] for e in feed]
pushed = project.events.list(action="pushed", get_all=True)[0]
out["push_data"] = [
    pushed.push_data["action"],
    pushed.push_data["ref_type"],
    pushed.push_data["ref"],
    pushed.push_data["commit_count"],
    pushed.push_data["commit_title"],
]
out["user"] = [e.action_name for e in gl.users.get(lin.id).events.list(get_all=True)]
out["lin_all"] = len(as_lin.events.list(scope="all", get_all=True))
tomorrow = (datetime.date.today() + datetime.timedelta(days=1)).isoformat()
out["before_tomorrow"] = len(project.events.list(before=tomorrow, get_all=True))
out["after_tomorrow"] = len(project.events.list(after=tomorrow, get_all=True))
out["asc"] = [e.action_name for e in project.events.list(sort="asc", get_all=True)][0]
out["bad_target_type"] = error_of(lambda: project.events.list(target_type="Issue"))

# A read_user token reads the user feeds, not a project's.
profile = connect(lin_read_user)
out["read_user_events"] = [e.action_name for e in profile.events.list(get_all=True)]
out["read_user_project"] = error_of(lambda: profile.projects.get(project.id, lazy=True).events.list())

report(out)
