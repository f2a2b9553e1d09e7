"""Groups, projects, files, commits, the tree, blobs, archives, compare, contributors, merge base,
branches, tags, changelogs, list searches, namespaces and deletion, as release scripts use them."""

import base64
import os
import tarfile
import tempfile
import zipfile

from depot import connect, error_of, report

gl = connect()
gl.auth()
out = {"user": gl.user.username}

group = gl.groups.create({"name": "Py Tools", "path": "py-tools", "description": None})
sub = gl.groups.create({"name": "Libs", "path": "libs", "parent_id": group.id})
out["groups"] = [group.full_path, sub.full_path, sub.parent_id == group.id]
out["subgroups"] = [g.full_path for g in group.subgroups.list(get_all=True)]

project = gl.projects.create(
    {
        "name": "Client",
        "namespace_id": sub.id,
        "initialize_with_readme": True,
        "description": "Made by python-gitlab",
        "visibility": "internal",
    }
)
project = gl.projects.get(project.id)
out["project"] = [
    project.path_with_namespace,
    project.default_branch,
    project.description,
    project.visibility,
    project.empty_repo,
]
out["by_path"] = gl.projects.get("py-tools/libs/client").id == project.id
out["readme"] = project.files.get("README.md", ref="main").decode().decode()
out["tag_v1"] = project.tags.create({"tag_name": "v1.0.0", "ref": "main"}).name

# Files: create, update, delete.
project.files.create(
    {
        "file_path": "docs/guide.md",
        "branch": "main",
        "content": "first\n",
        "commit_message": "Add the guide",
    }
)
guide = project.files.get("docs/guide.md", ref="main")
guide.content = "second\n"
guide.save(branch="main", commit_message="Rewrite the guide\n\nChangelog: changed")
out["guide"] = project.files.raw("docs/guide.md", ref="main").decode()
project.files.delete(file_path="docs/guide.md", branch="main", commit_message="Drop the guide")
out["guide_gone"] = error_of(lambda: project.files.get("docs/guide.md", ref="main"))

# One commit, several actions.
actions = [
    {"action": "create", "file_path": "src/client.py", "content": "VERSION = 1\n"},
    {
        "action": "create",
        "file_path": "data/blob.bin",
        "content": base64.b64encode(bytes(range(256))).decode(),
        "encoding": "base64",
    },
    {"action": "update", "file_path": "README.md", "content": "# Client\n"},
]
actions += [
    {"action": "create", "file_path": f"many/file-{i:02}.txt", "content": f"{i}\n"}
    for i in range(25)
]
commit = project.commits.create(
    {
        "branch": "main",
        "commit_message": "Add the client\n\nChangelog: added",
        "actions": actions,
    }
)
out["commit"] = [commit.title, len(commit.parent_ids), commit.stats["additions"]]
out["commit_diff"] = sorted(d["new_path"] for d in commit.diff(get_all=True))[:3]
out["commit_get"] = project.commits.get(commit.id).message

# The tree, a page at a time and whole.
pages = project.repository_tree(path="many", ref="main", per_page=10, iterator=True)
out["tree_iterator"] = [len([item["name"] for item in pages]), pages.total_pages]
whole = project.repository_tree(path="many", ref="main", per_page=10, get_all=True)
out["tree_all"] = [item["name"] for item in whole][::8]
root = project.repository_tree(ref="main", get_all=True)
out["tree_root"] = sorted((item["name"], item["type"]) for item in root)

# Blobs and raw files.
blob_id = next(item["id"] for item in root if item["name"] == "README.md")
blob = project.repository_blob(blob_id)
out["blob"] = [blob["encoding"], base64.b64decode(blob["content"]).decode(), blob["size"]]
out["raw_blob"] = project.repository_raw_blob(blob_id).decode()
out["raw_file"] = list(project.files.raw("data/blob.bin", ref="main")) == list(range(256))

# Archives, to a file, then opened.
with tempfile.TemporaryDirectory() as scratch:
    tgz = os.path.join(scratch, "client.tar.gz")
    with open(tgz, "wb") as f:
        project.repository_archive(sha="main", streamed=True, action=f.write, format="tar.gz")
    with tarfile.open(tgz) as archive:
        names = archive.getnames()
        readme = next(n for n in names if n.endswith("/README.md"))
        out["tar"] = [len(names), readme.split("/", 1)[1], archive.extractfile(readme).read().decode()]
    zipped = os.path.join(scratch, "client.zip")
    with open(zipped, "wb") as f:
        project.repository_archive(sha="main", streamed=True, action=f.write, format="zip")
    with zipfile.ZipFile(zipped) as archive:
        blob_name = next(n for n in archive.namelist() if n.endswith("data/blob.bin"))
        out["zip"] = [archive.testzip(), list(archive.read(blob_name)) == list(range(256))]

# Branches, compare, merge base, contributors.
branch = project.branches.create({"branch": "feature/faster", "ref": "main"})
project.commits.create(
    {
        "branch": "feature/faster",
        "commit_message": "Go faster\n\nChangelog: performance",
        "actions": [{"action": "update", "file_path": "src/client.py", "content": "VERSION = 2\n"}],
    }
)
out["branches"] = sorted(b.name for b in project.branches.list(get_all=True))
out["branch_get"] = [branch.name, project.branches.get("feature/faster").merged]
compare = project.repository_compare("main", "feature/faster")
out["compare"] = [
    [c["title"] for c in compare["commits"]],
    [d["new_path"] for d in compare["diffs"]],
    compare["compare_same_ref"],
]
base = project.repository_merge_base(["main", "feature/faster"])
out["merge_base"] = base["id"] == project.commits.get("main").id
out["contributors"] = [
    [c["name"], c["commits"]] for c in project.repository_contributors(get_all=True)
]

# Tags.
tag = project.tags.create({"tag_name": "v1.1.0-rc1", "ref": "feature/faster", "message": "Candidate"})
out["tags"] = sorted(t.name for t in project.tags.list(get_all=True))
out["tag_message"] = project.tags.get("v1.1.0-rc1").message
tag.delete()
project.branches.delete("feature/faster")
out["after_delete"] = [
    sorted(t.name for t in project.tags.list(get_all=True)),
    sorted(b.name for b in project.branches.list(get_all=True)),
]

# The changelog: generate (GET) and commit (POST), through the client's own HTTP helpers.
path = f"/projects/{project.id}/repository/changelog"
notes = gl.http_get(path, query_data={"version": "1.1.0", "date": "2026-01-15"})["notes"]
out["changelog_notes"] = notes
out["changelog_post"] = gl.http_post(
    path, post_data={"version": "1.1.0", "date": "2026-01-15", "branch": "main"}
)
out["changelog_file"] = project.files.raw("CHANGELOG.md", ref="main").decode() == notes

# Searching the lists, namespaces.
out["search_projects"] = [p.path_with_namespace for p in gl.projects.list(search="Client", get_all=True)]
out["search_groups"] = [g.full_path for g in gl.groups.list(search="libs", get_all=True)]
out["namespaces"] = [n.full_path for n in gl.namespaces.list(search="libs", get_all=True)]
out["namespace"] = [gl.namespaces.get(sub.id).kind, gl.namespaces.get("py-tools/libs").id == sub.id]

# Deletion.
project.delete()
out["deleted"] = error_of(lambda: gl.projects.get(project.id))
report(out)
