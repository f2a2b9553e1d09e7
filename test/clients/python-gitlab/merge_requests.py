"""Merge requests and approvals, as review and release scripts drive them."""

from depot import connect, error_of, report

gl = connect()
gl.auth()
me = gl.user
out = {}

project = gl.projects.create({"name": "reviewed", "initialize_with_readme": True})
project.branches.create({"branch": "feature-x", "ref": "main"})
project.commits.create(
    {
        "branch": "feature-x",
        "commit_message": "Add x",
        "actions": [{"action": "create", "file_path": "x.txt", "content": "x\n"}],
    }
)
mr = project.mergerequests.create(
    {"source_branch": "feature-x", "target_branch": "main", "title": "Add x", "description": "Adds x"}
)
out["created"] = [mr.iid, mr.state, mr.merge_status, mr.source_branch, mr.target_branch]
out["listed"] = [m.iid for m in project.mergerequests.list(state="opened", get_all=True)]
out["duplicate"] = error_of(
    lambda: project.mergerequests.create({"source_branch": "feature-x", "target_branch": "main", "title": "Again"})
)

config = project.approvals.get()
config.merge_requests_author_approval = True
config.save()
rule = project.approvalrules.create({"name": "Reviewers", "approvals_required": 1, "user_ids": [me.id]})
out["rule"] = [rule.name, rule.approvals_required, [u["username"] for u in rule.users]]
out["bad_rule"] = error_of(lambda: project.approvalrules.create({"name": "Bad", "approvals_required": -1}))

mr = project.mergerequests.get(mr.iid)
out["before"] = [mr.approvals.get().approvals_left, mr.detailed_merge_status]
out["blocked"] = error_of(mr.merge)
out["stale_sha"] = error_of(lambda: mr.approve(sha="0" * 40))
mr.approve(sha=mr.sha)
approvals = mr.approvals.get()
out["approved"] = [approvals.approvals_left, [a["user"]["username"] for a in approvals.approved_by]]
state = mr.approval_state.get()
out["state"] = [[r["name"], r["approved"]] for r in state.rules]

mr.merge(should_remove_source_branch=True)
mr = project.mergerequests.get(mr.iid)
out["merged"] = [mr.state, mr.merged_by["username"], mr.merge_commit_sha is not None]
out["main_has_x"] = project.files.get("x.txt", ref="main").decode().decode()
out["source_removed"] = error_of(lambda: project.branches.get("feature-x"))
out["commits"] = [c.title for c in mr.commits()]

report(out)
