"""Runners, pipelines and jobs, as CI administration and release scripts drive them."""

import requests

from depot import connect, error_of, report

gl = connect()
out = {}

project = gl.projects.create({"name": "py-ci", "initialize_with_readme": True})
project.files.create(
    {
        "file_path": ".gitlab-ci.yml",
        "branch": "main",
        "content": "stages: [build, test]\nbuild:\n  stage: build\n  script: [make]\ntest:\n  stage: test\n  script: [make test]\n",
        "commit_message": "Add CI",
    }
)

# Registration (python-gitlab 3.12 has no manager for the reset endpoints: its raw HTTP helpers).
registration = gl.http_post(f"/projects/{project.id}/runners/reset_registration_token")["token"]
runner = gl.runners.create({"token": registration, "description": "py-runner", "tag_list": ["py"]})
out["registered"] = [runner.token.startswith("glrt-"), runner.id > 0]
out["verified"] = error_of(lambda: gl.http_post("/runners/verify", post_data={"token": runner.token})) is None
out["bad_token"] = error_of(lambda: gl.runners.create({"token": "GR1348941nope"}))

shown = gl.runners.get(runner.id)
out["runner"] = [shown.description, shown.status, shown.runner_type, shown.tag_list]
shown.description = "renamed"
shown.save()
out["renamed"] = gl.runners.get(runner.id).description
out["project_runners"] = [r.id == runner.id for r in project.runners.list()]
out["all_runners"] = runner.id in [r.id for r in gl.runners.all(get_all=True)]

# A pipeline on demand; a runner (raw protocol) takes the first job and finishes it.
pipeline = project.pipelines.create({"ref": "main"})
out["pipeline"] = [pipeline.status, pipeline.ref, pipeline.source]
out["jobs"] = [[j.name, j.status] for j in pipeline.jobs.list()]
# The runner is tagged "py" but takes untagged jobs too (run_untagged defaults to true).
job = gl.http_post("/jobs/request", post_data={"token": runner.token})
# python-gitlab has no call for a raw-body PATCH: the runner's request, with requests.
patched = requests.patch(
    f"{gl.api_url}/jobs/{job['id']}/trace",
    headers={"JOB-TOKEN": job["token"], "Content-Range": "0-5", "Content-Type": "text/plain"},
    data=b"built\n",
)
out["patched"] = [patched.status_code, patched.headers.get("Range")]
gl.http_put(f"/jobs/{job['id']}", post_data={"token": job["token"], "state": "success"})
out["trace"] = project.jobs.get(job["id"]).trace().decode()
out["after_build"] = [[j.name, j.status] for j in project.pipelines.get(pipeline.id).jobs.list()]
out["runner_jobs"] = [j.id for j in gl.runners.get(runner.id).jobs.list()] == [job["id"]]
out["online"] = gl.runners.get(runner.id).status

# Cancel and retry the rest.
pipeline = project.pipelines.get(pipeline.id)
pipeline.cancel()
out["canceled"] = project.pipelines.get(pipeline.id).status
pipeline.retry()
out["retried"] = project.pipelines.get(pipeline.id).status

# Removing the runner's only project is refused; the runner itself is deleted by its token.
out["disable_only"] = error_of(lambda: project.runners.delete(runner.id))
gl.http_delete("/runners", query_data={"token": runner.token})
out["deleted"] = error_of(lambda: gl.runners.get(runner.id))

report(out)
