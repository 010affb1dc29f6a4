"""Resumable streams through the router, as llama-server's router has them: a request sent with
``X-Conversation-Id`` is remembered with its model (before it waits for the load), and
``GET /v1/stream?conv_id=``, ``DELETE /v1/stream?conv_id=`` and ``POST /v1/streams/lookup`` go
straight to the process of that model, which keeps the session.

While the model loads, a resume gets 503 "retry later", and a stop cancels the waiting request
(its client gets a 400) instead of leaving a generation nobody can stop.
"""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..api.errors import ApiError
from .instances import Instance
from .proxy import ModelProxy
from .registry import ModelRouter

__all__ = ["Conversations", "StreamRoutes"]

log = logging.getLogger("pyllama_yield.router")

_LOOKUP_TIMEOUT_S = 5.0


class Conversations:
    """conversation id -> the model serving it, and a ticket per request: a stop forgets the
    conversation, and the request holding the ticket sees it is no longer alive."""

    def __init__(self) -> None:
        self._models: dict[str, tuple[str, int]] = {}
        self._tickets = itertools.count(1)

    def remember(self, conv_id: str, model: str) -> int:
        ticket = next(self._tickets)
        self._models[conv_id] = (model, ticket)
        return ticket

    def alive(self, conv_id: str, ticket: int) -> bool:
        return self._models.get(conv_id, ("", 0))[1] == ticket

    def model(self, conv_id: str) -> str | None:
        entry = self._models.get(conv_id)
        return entry[0] if entry else None

    def forget(self, conv_id: str) -> None:
        self._models.pop(conv_id, None)


class StreamRoutes:
    def __init__(self, router: ModelRouter, proxy: ModelProxy, conversations: Conversations) -> None:
        self.router = router
        self.proxy = proxy
        self.conversations = conversations

    def _owner(self, conv_id: str) -> Instance | None:
        """The serving model that holds ``conv_id``'s session; None when none does (yet)."""
        model = self.conversations.model(conv_id)
        inst = self.router.find(model) if model else None
        return inst if inst is not None and inst.serving else None

    async def get(self, request: Request) -> Response:
        conv_id = _conv_id(request)
        owner = self._owner(conv_id)
        if owner is None:
            model = self.conversations.model(conv_id)
            inst = self.router.find(model) if model else None
            if inst is not None and (inst.loading is not None or inst.queued or inst.status == "loading"):
                raise ApiError("Stream owner model is loading, retry later", 503, "unavailable_error")
            raise ApiError("Stream not found or expired", 404, "not_found_error")
        return await self.proxy.forward(request, owner, b"")

    async def delete(self, request: Request) -> Response:
        conv_id = _conv_id(request)
        owner = self._owner(conv_id)
        if owner is not None:
            try:  # the model's process ends the session (and its generation)
                await self.proxy.client.delete(f"{owner.url}/v1/stream", params={"conv_id": conv_id})
            except httpx.HTTPError as exc:
                log.warning("stopping conv_id=%s on model %s failed: %s", conv_id, owner.entry.id, exc)
        elif self.conversations.model(conv_id) is None:
            log.warning("stop for an unknown conv_id=%s", conv_id)
        self.conversations.forget(conv_id)  # a request still waiting for its model is cancelled
        return Response(status_code=204)

    async def lookup(self, request: Request) -> Response:
        """Each model that holds some of the ids is asked about those only; the answers joined."""
        try:
            body = json.loads(await request.body() or b"{}")
            ids = [i for i in body.get("conversation_ids", []) if isinstance(i, str) and i]
        except (ValueError, AttributeError, TypeError):
            return JSONResponse([])
        by_owner: dict[str, tuple[Instance, list[str]]] = {}
        for conv_id in ids:
            owner = self._owner(conv_id)
            if owner is not None:
                by_owner.setdefault(owner.entry.id, (owner, []))[1].append(conv_id)
        found: list[Any] = []
        for owner, owned in by_owner.values():
            try:
                r = await self.proxy.client.post(
                    f"{owner.url}/v1/streams/lookup", json={"conversation_ids": owned}, timeout=_LOOKUP_TIMEOUT_S
                )
                answer = r.json() if r.status_code == 200 else []
            except (httpx.HTTPError, ValueError):
                continue
            found += [e for e in answer if isinstance(e, dict)] if isinstance(answer, list) else []
        return JSONResponse(found)


def _conv_id(request: Request) -> str:
    conv_id = request.query_params.get("conv_id", "")
    if not conv_id:
        raise ApiError("Missing conversation id in path")
    return conv_id
