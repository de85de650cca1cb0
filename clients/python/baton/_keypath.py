"""The path of a key in the API's /v1/locks/{key} and /v1/resources/{key} routes."""

from __future__ import annotations

import urllib.parse


def key_path(key: str) -> str:
    """Escapes key for /v1/locks/{key} and /v1/resources/{key}: each "/"-separated segment is escaped and the slashes
    kept; where the server's router would clean a literal slash or dot segment away ("a//b", "/a",
    "a/./b"), it is sent as %2F joined to its neighbour, as the TypeScript client does."""
    segs = key.split("/")

    def dot(s: str) -> bool:
        return s in (".", "..")

    out = []
    for i, seg in enumerate(segs):
        if i > 0:
            joined = segs[i - 1] == "" or (seg == "" and i < len(segs) - 1) or dot(seg) or (i == 1 and dot(segs[0]))
            out.append("%2F" if joined else "/")
        out.append(seg if dot(seg) else urllib.parse.quote(seg, safe=""))
    return "".join(out)
