"""Transfers and sharing, as admin and reorganisation scripts use them."""

import gitlab
from depot import connect, error_of, report

gl = connect()
out = {}

lin = gl.users.create(
    {
        "username": "yu",
        "email": "yu@example.com",
        "name": "Lin Yu",
        "password": "a long enough password, really",
        "skip_confirmation": True,
    }
)
as_lin = connect(lin.personal_access_tokens.create({"name": "cli", "scopes": ["api"]}).token)

readers = gl.groups.create({"name": "Readers", "path": "readers"})
readers.members.create({"user_id": lin.id, "access_level": gitlab.const.DEVELOPER_ACCESS})
platform = gl.groups.create({"name": "Platform", "path": "platform"})
service = gl.projects.create({"name": "service", "initialize_with_readme": True, "visibility": "private"})


def commit(project_id, name):
    """A commit by Lin on a new branch (main is protected): done, or the error raised."""
    project = as_lin.projects.get(project_id, lazy=True)
    data = {
        "branch": "topic-" + name,
        "start_branch": "main",
        "commit_message": "add " + name,
        "actions": [{"action": "create", "file_path": name, "content": "x"}],
    }
    return error_of(lambda: project.commits.create(data)) or "committed"


# A project shared with a group: its members get at most the link's level.
out["before_share"] = error_of(lambda: as_lin.projects.get(service.id))
service.share(readers.id, gitlab.const.REPORTER_ACCESS, expires_at="2099-12-31")
seen = as_lin.projects.get(service.id)
out["shared_with"] = [[g["group_full_path"], g["group_access_level"], g["expires_at"]] for g in seen.shared_with_groups]
out["readme_as_lin"] = seen.files.raw(file_path="README.md", ref="main").decode().splitlines()[0]
out["commit_as_reporter"] = commit(service.id, "a.txt")
out["groups"] = [g.full_path for g in service.groups.list(with_shared=True, get_all=True)]
out["member_all"] = sorted([m.username, m.access_level] for m in service.members_all.list(get_all=True))
service.unshare(readers.id)
out["after_unshare"] = error_of(lambda: as_lin.projects.get(service.id))

# A group shared with a group: Developer through the link.
api = gl.projects.create({"name": "api", "namespace_id": platform.id, "initialize_with_readme": True})
platform.share(readers.id, gitlab.const.DEVELOPER_ACCESS)
out["group_shared_with"] = [g["group_full_path"] for g in platform.shared_with_groups]
out["commit_as_developer"] = commit(api.id, "b.txt")
platform.unshare(readers.id)
out["after_group_unshare"] = error_of(lambda: as_lin.projects.get(api.id))

# Transfers: a project into a group, a group under another and back to the top.
service.transfer(platform.full_path)
out["transferred"] = gl.projects.get(service.id).path_with_namespace
out["transfer_again"] = error_of(lambda: service.transfer(platform.id))
# Scripts that still name the project by its old path: reads follow the 301, writes get 405.
out["old_path_read"] = gl.projects.get("ada/service").path_with_namespace
out["old_path_file"] = gl.projects.get("ada/service", lazy=True).files.raw(file_path="README.md", ref="main").decode()
stale = gl.projects.get("ada/service", lazy=True)
stale.description = "renamed"
out["old_path_write"] = error_of(stale.save)
sub = gl.groups.create({"name": "Tools", "path": "tools", "parent_id": platform.id})
sub.transfer(readers.id)
out["group_moved"] = gl.groups.get(sub.id).full_path
sub.transfer()
out["group_top"] = [gl.groups.get(sub.id).full_path, gl.groups.get(sub.id).parent_id]
out["group_top_again"] = error_of(lambda: sub.transfer())

report(out)
