"""Repository operations release scripts use: cherry-pick and revert of commits, file blame,
the refs a commit is on, its signature, and the administrator's repository snapshot."""

import io
import tarfile

from depot import connect, error_of, report

gl = connect()
gl.auth()
out = {}

project = gl.projects.create({"name": "Ops", "initialize_with_readme": True})
project.files.create(
    {
        "file_path": "notes.txt",
        "branch": "main",
        "content": "one\ntwo\nthree\n",
        "commit_message": "Add notes",
    }
)
project.branches.create({"branch": "topic", "ref": "main"})
topic = project.commits.create(
    {
        "branch": "topic",
        "commit_message": "Add extra",
        "actions": [{"action": "create", "file_path": "extra.txt", "content": "extra\n"}],
    }
)
notes = project.files.get("notes.txt", ref="main")
notes.content = "one\nTWO\nthree\n"
notes.save(branch="main", commit_message="Shout two")

# Cherry-pick the topic commit onto main; a second time it is already there.
commit = project.commits.get(topic.id)
commit.cherry_pick(branch="main")
head = project.commits.get("main")
out["picked"] = [
    head.parent_ids == [project.commits.get("main~1").id],
    head.message == f"Add extra\n\n(cherry-picked from commit {topic.id})",
    project.files.raw("extra.txt", ref="main").decode(),
]
out["picked_again"] = error_of(lambda: commit.cherry_pick(branch="main"))
out["picked_unknown_branch"] = error_of(lambda: commit.cherry_pick(branch="nope"))

# Revert the shout: notes.txt is back as it was.
shout = project.commits.get("main~1")
reverted = shout.revert(branch="main")
out["reverted"] = [
    reverted["title"],
    reverted["message"] == f'Revert "Shout two"\n\nThis reverts commit {shout.id}',
    project.files.raw("notes.txt", ref="main").decode(),
]
out["reverted_again"] = error_of(lambda: shout.revert(branch="main"))

# Blame: the lines of notes.txt by the commit that last changed them.
blame = project.files.blame("notes.txt", "main")
out["blame"] = [[group["commit"]["message"].split("\n")[0], group["lines"]] for group in blame]

out["refs"] = commit.refs()
out["refs_main"] = project.commits.get("main~2").refs(type="branch")
out["signature"] = error_of(commit.signature)

snapshot = project.snapshot()
with tarfile.open(fileobj=io.BytesIO(snapshot)) as archive:
    names = archive.getnames()
out["snapshot"] = ["HEAD" in names, any(n.startswith("objects/") for n in names), "config" in names]

report(out)
