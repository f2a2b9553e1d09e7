"""Users and their tokens, members of groups and projects, and avatars, as admin scripts use them."""

import struct
import zlib

import gitlab
from depot import connect, error_of, report


def png():
    """A 1x1 PNG: binary bytes, NULs included, as an avatar file holds."""

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


gl = connect()
out = {}

# Users.
grace = gl.users.create(
    {
        "username": "grace",
        "email": "grace@example.com",
        "name": "Grace Hopper",
        "password": "a long enough password, really",
        "skip_confirmation": True,
    }
)
out["user"] = [grace.username, grace.name, grace.state]
out["user_get"] = gl.users.get(grace.id).username
out["users_by_username"] = [u.id == grace.id for u in gl.users.list(username="grace", get_all=True)]
out["users_search"] = [u.username for u in gl.users.list(search="Hopper", get_all=True)]
grace.name = "Grace B. Hopper"
grace.save()
out["user_renamed"] = gl.users.get(grace.id).name

# Their tokens.
created = grace.personal_access_tokens.create({"name": "release", "scopes": ["api", "read_user"]})
out["token"] = [created.name, created.scopes, created.active, created.token.startswith("glpat-")]
as_grace = connect(created.token)
as_grace.auth()
out["token_user"] = as_grace.user.username
listed = gl.personal_access_tokens.list(user_id=grace.id, get_all=True)
out["tokens"] = [[t.name, t.user_id == grace.id, t.revoked] for t in listed]
gl.personal_access_tokens.delete(created.id)
out["token_revoked"] = error_of(lambda: connect(created.token).auth())
out["tokens_after"] = [t.revoked for t in gl.personal_access_tokens.list(user_id=grace.id, get_all=True)]

# Members: add, change, remove, on a group and on a project; avatars go up with them.
group = gl.groups.create({"name": "Crew", "path": "crew", "avatar": png()})
project = gl.projects.create({"name": "logbook", "namespace_id": group.id})
for source in (group, project):
    member = source.members.create(
        {"user_id": grace.id, "access_level": gitlab.const.DEVELOPER_ACCESS, "expires_at": None}
    )
    kind = type(source).__name__
    out[f"{kind}_added"] = [member.username, member.access_level]
    member = source.members.get(grace.id)
    member.access_level = gitlab.const.MAINTAINER_ACCESS
    member.save()
    out[f"{kind}_changed"] = source.members.get(grace.id).access_level
    out[f"{kind}_list"] = sorted([m.username, m.access_level] for m in source.members.list(get_all=True))
    out[f"{kind}_all"] = sorted(m.username for m in source.members_all.list(get_all=True))
    source.members.delete(grace.id)
    out[f"{kind}_removed"] = error_of(lambda: source.members.get(grace.id))

# Avatars: multipart with a file part that has a filename and no Content-Type.
with_avatar = gl.projects.create({"name": "pictured", "avatar": png()})
out["avatar_project"] = with_avatar.name
with_avatar.avatar = png()
with_avatar.save()
out["avatar_saved"] = gl.projects.get(with_avatar.id).name
report(out)
