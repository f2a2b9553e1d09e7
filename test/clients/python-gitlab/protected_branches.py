"""Protected branches, as release scripts set them up: protect a wildcard, grant a user, list,
get, refuse a duplicate, see a developer refused, unprotect."""

from depot import connect, error_of, report

gl = connect()
out = {}

project = gl.projects.create({"name": "Guarded", "initialize_with_readme": True})
out["default"] = [
    [b.name, [a["access_level"] for a in b.push_access_levels]] for b in project.protectedbranches.list(get_all=True)
]

dev = gl.users.create(
    {
        "username": "linus",
        "email": "linus@example.com",
        "name": "Linus",
        "password": "a long enough password, really",
        "skip_confirmation": True,
    }
)
project.members.create({"user_id": dev.id, "access_level": 30})

release = project.protectedbranches.create(
    {
        "name": "release/*",
        "push_access_level": 0,
        "merge_access_level": 30,
        "allowed_to_push": [{"user_id": dev.id}],
    }
)
out["created"] = [
    release.name,
    [[a["access_level"], a["user_id"] == dev.id, a["access_level_description"]] for a in release.push_access_levels],
    [a["access_level_description"] for a in release.merge_access_levels],
    release.allow_force_push,
]
got = project.protectedbranches.get("release/*")
out["get"] = [got.name, got.id == release.id]
out["duplicate"] = error_of(lambda: project.protectedbranches.create({"name": "release/*"}))
out["names"] = [b.name for b in project.protectedbranches.list(get_all=True)]

# The developer: refused on the default branch, admitted on release/* by the user grant.
token = dev.personal_access_tokens.create({"name": "dev", "scopes": ["api"]}).token
as_dev = connect(token).projects.get(project.id, lazy=True)
commit = {
    "branch": "main",
    "commit_message": "try",
    "actions": [{"action": "create", "file_path": "dev.txt", "content": "x"}],
}
out["dev_main"] = error_of(lambda: as_dev.commits.create(commit))
out["dev_release"] = as_dev.commits.create(
    {**commit, "branch": "release/1.0", "start_branch": "main"}
).title
out["branch_flags"] = [
    project.branches.get("release/1.0").protected,
    project.branches.get("main").developers_can_push,
]

got.delete()
out["after_delete"] = [b.name for b in project.protectedbranches.list(get_all=True)]
out["gone"] = error_of(lambda: project.protectedbranches.get("release/*"))
report(out)
