"""Ollama's API at the router: ``/api/tags`` and ``/api/ps`` list the router's models (each model's
own process answers the rest, routed by the body's ``model``), ``keep_alive`` becomes the model's
time to stay loaded, and errors take Ollama's shape."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import hub
from ..api.ollama import OLLAMA_API_VERSION
from ..api.ollama_request import body_model, keep_alive_seconds
from ..server.errors import ErrorKind
from .instances import Instance
from .registry import ModelRouter, RouterError

__all__ = ["body_model", "hub_spec", "keep_alive_seconds", "ollama_name", "ps", "pull", "removable", "tags", "version"]


def ollama_name(inst: Instance) -> str:
    return inst.entry.id if ":" in inst.entry.id else f"{inst.entry.id}:latest"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _entry(inst: Instance) -> dict[str, Any]:
    path = Path(inst.entry.flags.get("--model", ""))
    return {
        "name": ollama_name(inst),
        "model": ollama_name(inst),
        "modified_at": _now().isoformat(),
        "size": path.stat().st_size if path.is_file() else 0,
        "digest": "",
        "details": {"parent_model": "", "format": "gguf", "family": "", "families": [], "parameter_size": "",
                    "quantization_level": ""},
    }  # fmt: skip


def tags(router: ModelRouter) -> Response:
    return JSONResponse({"models": [_entry(i) for i in router.instances.values()]})


def ps(router: ModelRouter) -> Response:
    models = []
    for inst in router.instances.values():
        if inst.serving:
            ttl = inst.keep_alive
            left = None if ttl is None or ttl < 0 else ttl - (time.monotonic() - inst.idle_since)
            expires = (
                _now() + timedelta(seconds=max(0.0, left))
                if left is not None
                else datetime(2318, 1, 1, tzinfo=timezone.utc)
            )
            models.append({**_entry(inst), "expires_at": expires.isoformat(), "size_vram": 0})
    return JSONResponse({"models": models})


def version(request: Request) -> Response:
    return JSONResponse({"version": OLLAMA_API_VERSION})


def hub_spec(name: Any) -> str:
    """An Ollama pull name for a Hugging Face model (``hf.co/user/repo:quant`` or ``user/repo:quant``)
    as ``-hf`` takes it; ``ValueError`` for a name of Ollama's own library."""
    if not isinstance(name, str) or not name:
        raise ValueError("model is required")
    spec = re.sub(r"^(https?://)?(hf\.co|huggingface\.co)/", "", name)
    spec = spec.removesuffix(":latest")
    if spec.count("/") != 1:
        raise ValueError(f"{name}: only Hugging Face models can be pulled here (hf.co/user/repo[:quant])")
    return spec


async def pull(router: ModelRouter, body: dict[str, Any], token: str | None) -> AsyncIterator[dict[str, Any]]:
    """``/api/pull``: the model's files into the download cache (the same choice as ``-hf``), then the
    router lists it. Progress per file, as NDJSON objects. As ``POST /models``, an explicit download
    whatever ``--offline`` (which governs where models are found)."""
    spec = hub_spec(body_model(body))
    yield {"status": "pulling manifest"}
    got = await asyncio.to_thread(hub.download, spec, token=token)
    for path in (got.path, got.mmproj):
        if path is not None:
            size = path.stat().st_size
            yield {"status": f"pulling {path.name}", "digest": "", "total": size, "completed": size}
    router.reload()
    yield {"status": "success"}


def removable(router: ModelRouter, body: dict[str, Any]) -> str:
    """``/api/delete``'s model: one of the download cache (Ollama's 404 for an unknown name)."""
    name = body_model(body)
    inst = router.find(name) if isinstance(name, str) else None
    if inst is None:
        raise RouterError(f"model '{name}' not found", ErrorKind.UNKNOWN_MODEL)
    if inst.entry.source != "cache":
        raise RouterError(f"model name={inst.entry.id} is not removable (not from cache)")
    return inst.entry.id
