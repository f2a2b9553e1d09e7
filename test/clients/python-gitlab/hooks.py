"""Project webhooks and integrations, as CI bootstrap scripts set them up."""

import os

from depot import connect, error_of, report

gl = connect()
out = {}
base = os.environ["DEPOT_URL"]

project = gl.projects.create({"name": "hooked", "initialize_with_readme": True})

# Depot's own URL is reachable although local, as GitLab allows its own host.
hook = project.hooks.create(
    {"url": base + "/receiver", "tag_push_events": True, "token": "s3cret", "push_events_branch_filter": "main"}
)
out["created"] = [hook.push_events, hook.tag_push_events, hook.merge_requests_events, hasattr(hook, "token")]
out["listed"] = [h.url for h in project.hooks.list()] == [base + "/receiver"]
hook.note_events = True
hook.save()
again = project.hooks.get(hook.id)
out["saved"] = [again.note_events, again.push_events_branch_filter]
out["refused"] = error_of(lambda: project.hooks.create({"url": "http://10.0.0.1/x"}))
again.delete()
out["deleted"] = error_of(lambda: project.hooks.get(hook.id))

# Integrations: the older services path and the newer integrations path.
out["missing"] = error_of(lambda: project.integrations.update("slack", {"channel": "#dev"}))
project.integrations.update("slack", {"webhook": base + "/slack", "channel": "#dev", "push_events": False})
slack = project.integrations.get("slack")
out["slack"] = [slack.active, slack.push_events, slack.properties.get("channel"), "webhook" in slack.properties]
slack.channel = "#ops"
slack.save()
out["kept"] = [project.services.get("slack").properties.get("channel"), "webhook" in project.services.get("slack").properties]
out["active"] = [i.slug for i in project.integrations.list()]
project.integrations.delete("slack")
out["after_delete"] = [i.slug for i in project.integrations.list()]

report(out)
