"""Environments and deployments, as deploy scripts outside Depot's CI record them."""

from depot import connect, error_of, report

gl = connect()
out = {}

app = gl.projects.create({"name": "deployed", "initialize_with_readme": True})
sha = app.commits.list(ref_name="main")[0].id
staging = app.environments.create({"name": "staging", "external_url": "https://staging.example.com"})
out["created"] = [staging.name, staging.slug, staging.state, staging.external_url]
out["bad_name"] = error_of(lambda: app.environments.create({"name": "bad name!"}))
deployment = app.deployments.create(
    {"environment": "staging", "sha": sha, "ref": "main", "tag": False, "status": "running"}
)
deployment.status = "success"
deployment.save()
out["deployment"] = [deployment.iid, app.deployments.get(deployment.id).status]
out["listed"] = [e.name for e in app.environments.list()]
shown = app.environments.get(staging.id)
out["last_deployment"] = [shown.last_deployment["status"], shown.last_deployment["sha"] == sha]
out["delete_available"] = error_of(lambda: app.environments.delete(staging.id))
shown.stop()
out["stopped"] = app.environments.get(staging.id).state
app.environments.delete(staging.id)
out["deleted"] = error_of(lambda: app.environments.get(staging.id))
report(out)
