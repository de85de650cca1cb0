"""Resources (what jobs run on: a state that kinds' guards check and set, a cooldown) and fences,
as methods of Client."""

from __future__ import annotations

from typing import Any, Dict, Optional

from ._keypath import key_path
from .errors import NotFoundError


class ResourceMethods:
    """Client's calls on /v1/resources and /v1/fences (docs/http-api.md)."""

    def get_resource(self, key: str, *, line_limit: Optional[int] = None) -> dict:
        """A resource: {"key", "state", "version", "running_job", "unfinished", "cooldown"?, ...}.
        From a server whose store keeps one line per key (SQLite, PostgreSQL), also who holds it
        ("holder"?: {"holder", "token", "expires_at", "job"?, ...}), whether it rests ("rest"?:
        {"reason", "remaining_ms", "until"}) and who waits for it, in order ("line": tickets
        {"position", "type": "lock" or "job", "holder", "since", ...}, at most line_limit from the
        front, 1 to 1000, default 100). A key with no job or state recorded is a resource (state
        "", version 0) while someone holds it, waits for it or it rests; NotFoundError if there
        is nothing at all on the key."""
        if key in (".", ".."):
            # The router would clean the path segment away; read it through the listing (without
            # its line).
            page = self.list_resources(prefix=key, limit=1)
            if page["resources"] and page["resources"][0]["key"] == key:
                return page["resources"][0]
            raise NotFoundError(f"baton: GET /v1/resources/{key}: 404 not_found", status=404, code="not_found")
        return self._request("GET", "/v1/resources/" + key_path(key), query={"line_limit": line_limit})

    def explain_resource(self, key: str) -> dict:
        """Why key would not be granted to a new request now: {"key", "reasons": [{"code",
        "message", ...}]} (held, resting, ahead); none if nothing holds it back."""
        return self._request("GET", "/v1/resources/" + key_path(key) + "/explain")

    def list_resources(self, *, prefix: Optional[str] = None, after: Optional[str] = None,
                       limit: Optional[int] = None) -> dict:
        """One page of resources by key: {"resources": [...], "next_after"?}; pass next_after as
        after for the next page."""
        return self._request("GET", "/v1/resources", query={"prefix": prefix, "after": after, "limit": limit})

    def set_resource_state(self, key: str, state: str, *, if_version: Optional[int] = None) -> dict:
        """Sets a resource's state (admin: it overrides the kinds' guards), creating the resource
        if needed; returns it with its new version. With if_version, only if the resource is
        still at that version: otherwise VersionMismatchError (current_version), nothing
        written."""
        body: Dict[str, Any] = {"state": state}
        if if_version is not None:
            body["if_version"] = if_version
        # key_path of the whole path, so that a key ending in "/" keeps its slash escaped.
        return self._request("PUT", "/v1/resources/" + key_path(key + "/state"), body=body)

    def clear_resource_cooldown(self, key: str, reason: str) -> dict:
        """Ends a resource's cooldown early (admin), audited with reason; returns what was
        cleared: {"resource", "until", "remaining_ms", "job"}. NotFoundError if it is not
        cooling down."""
        return self._request("POST", "/v1/resources/" + key_path(key + "/clear-cooldown"), body={"reason": reason})

    def check_fence(self, resource: str, token: int) -> dict:
        """Raises resource's fence to token (docs/fencing.md): passes if no greater token was
        presented for it before (equal tokens pass) and returns {"resource", "token"}; otherwise
        StaleTokenError (current_token): the holder of token has lost its lease, refuse its
        write. Needs a server on SQLite or PostgreSQL (others answer 501)."""
        if not isinstance(token, int) or isinstance(token, bool) or token <= 0:
            raise ValueError(f"baton: token must be a positive integer (got {token!r})")
        return self._request("POST", "/v1/fences/check", body={"resource": resource, "token": token})

    def reset_fence(self, resource: str, reason: str) -> dict:
        """Deletes resource's fence (admin), audited with reason, so that its next check accepts
        any token the store has issued (docs/fencing.md, "Resetting a fence"); returns
        {"resource", "token"}: the token the fence held. NotFoundError if it has no fence."""
        if not reason:
            raise ValueError("baton: reason is required to reset a fence")
        return self._request("DELETE", "/v1/fences/" + key_path(resource), query={"reason": reason})
