"""The API key check (``--api-key``), as llama-server makes it: ``Authorization: Bearer KEY`` (or a
bare key) or ``X-Api-Key: KEY``."""

from __future__ import annotations

from starlette.requests import Request

__all__ = ["authorized"]


def authorized(request: Request, keys: list[str]) -> bool:
    """Whether ``request`` may pass: no keys configured, or one of them given."""
    if not keys:
        return True
    auth = request.headers.get("authorization", "") or request.headers.get("x-api-key", "")
    return (auth[7:] if auth.startswith("Bearer ") else auth) in keys
