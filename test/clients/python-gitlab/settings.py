"""Application settings, plan limits and the audit trail, as instance administration scripts use them."""

from depot import connect, error_of, report

gl = connect()
out = {}

settings = gl.settings.get()
out["defaults"] = [settings.default_projects_limit, settings.default_project_visibility, settings.signup_enabled]
settings.default_projects_limit = 7
settings.default_project_visibility = "internal"
settings.save()
again = gl.settings.get()
out["changed"] = [again.default_projects_limit, again.default_project_visibility]

# A bad value is refused and changes nothing, not even the valid attribute sent with it.
bad = gl.settings.get()
bad.default_projects_limit = 9
bad.default_project_visibility = "secret"
out["refused"] = error_of(bad.save)
after = gl.settings.get()
out["unchanged"] = [after.default_projects_limit, after.default_project_visibility]

# The setting acts: a project created without a visibility gets the instance default.
out["project_visibility"] = gl.projects.create({"name": "settled"}).visibility

# Plan limits (python-gitlab 3.12 has no manager for them: its raw HTTP helpers).
limits = gl.http_get("/application/plan_limits", query_data={"plan_name": "default"})
out["npm_limit"] = limits["npm_max_file_size"]
changed = gl.http_put("/application/plan_limits", query_data={"plan_name": "default", "npm_max_file_size": 1048576})
out["npm_changed"] = changed["npm_max_file_size"]
out["unknown_plan"] = error_of(lambda: gl.http_get("/application/plan_limits", query_data={"plan_name": "gold-ish"}))

# The audit trail records each change.
events = gl.audit_events.list(get_all=True)
out["audited"] = len(events) >= 3

report(out)
