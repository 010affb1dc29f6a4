"""Server-level routes: GET /, /props, /apply-template, slot actions (POST /slots/{id}?action=),
the LoRA adapters' global scales (GET/POST /lora-adapters)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeGuard

from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from .. import __version__
from ..queue import TaskType
from ..server.params import LoraScale
from ..server.results import SlotErased, SlotFileDone
from .app_state import AppState, json_body, json_value
from .errors import ApiError
from .json_out import JSONResponse

WEBUI = Path(__file__).resolve().parent.parent / "webui"  # the chat page, shipped in the package

_SLOT_TASKS = {"save": TaskType.SLOT_SAVE, "restore": TaskType.SLOT_RESTORE, "erase": TaskType.SLOT_ERASE}


async def index(request: Request) -> Response:
    """The chat page (``webui/index.html``, or ``--path``'s); with ``--no-ui``, a 404 as llama-server."""
    return FileResponse(ui_folder(request) / "index.html", headers={"Cache-Control": "no-cache"})


async def ui_version(request: Request) -> Response:
    """``/_app/version.json``, where llama-server's page (SvelteKit) says which build it is."""
    ui_folder(request)
    return JSONResponse({"version": __version__})


def ui_folder(request: Request) -> Path:
    """The page's folder (``--path``, else the package's); a 404 with ``--no-ui``."""
    settings = request.app.state.pyllama.settings
    if not settings.ui:
        raise ApiError("the web UI is off (--no-ui)", 404, "not_found_error")
    return Path(settings.path or WEBUI)


def props_json(state: AppState) -> dict[str, Any]:
    engine, settings = state.engine, state.settings
    info = engine.info
    defaults = engine.defaults
    return {
        "default_generation_settings": {
            "params": {k: v for k, v in engine.tasks.default_settings().items() if k not in ("stop", "grammar")},
            "n_ctx": engine.n_ctx_slot,
        },
        "total_slots": engine.n_parallel,
        "model_alias": info["model"],
        "model_path": info["model_path"],
        "modalities": info["modalities"],
        **({"media_marker": info["media_marker"]} if info["media_marker"] else {}),
        "endpoint_slots": settings.slots,
        "endpoint_props": settings.props,
        "endpoint_metrics": settings.metrics,
        "ui": settings.ui,
        "chat_template": info["chat_template"],
        "bos_token": engine.tasks.token_text(engine.vocab.bos),
        "eos_token": engine.tasks.token_text(engine.vocab.eos),
        "build_info": info["system_fingerprint"],
        "is_sleeping": engine.is_sleeping,
        "n_predict_default": defaults.n_predict,
    }


async def get_props(request: Request) -> Response:
    return JSONResponse(props_json(request.app.state.pyllama))


async def post_props(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    if not state.settings.props:
        raise ApiError(
            "This server does not support changing global properties. Start it with `--props`",
            501,
            "not_supported_error",
        )
    await json_body(request)
    return JSONResponse({"success": True})


async def apply_template(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    body = await json_body(request)
    plan = await state.bridge.build(lambda: state.engine.chats.plan(body, media_path=state.settings.media_path))
    prompt = plan.fields["prompt"]  # with media: the text, a marker for each medium
    return JSONResponse({"prompt": prompt["prompt_string"] if isinstance(prompt, dict) else prompt})


def _valid_filename(name: object) -> TypeGuard[str]:
    """A plain file name inside the slot folder: no path, no traversal, nothing odd (as llama.cpp's
    ``fs_validate_filename``)."""
    if not isinstance(name, str) or name in (".", ".."):
        return False
    try:
        size = len(name.encode("utf-8"))  # a lone surrogate is no file name
    except UnicodeEncodeError:
        return False
    if not 0 < size <= 255 or any(c in name for c in '/\\:*?"<>|'):
        return False
    if any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in name):  # control characters, C0 and C1
        return False
    return not name.startswith(" ") and not name.endswith((" ", "."))


async def slot_action(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    folder = state.settings.slot_save_path
    if not folder:
        raise ApiError(
            "This server does not support slots action. Start it with `--slot-save-path`", 501, "not_supported_error"
        )
    try:
        id_slot = int(request.path_params["id_slot"])
    except ValueError:
        raise ApiError("Invalid slot ID") from None
    action = request.query_params.get("action", "")
    if action not in _SLOT_TASKS:
        raise ApiError("Invalid action")
    payload: dict[str, Any] = {"id_slot": id_slot}
    if action != "erase":
        name = (await json_body(request)).get("filename")
        if not _valid_filename(name):
            raise ApiError("Invalid filename")
        path = Path(folder) / name
        if action == "restore" and not path.is_file():
            raise ApiError(f"no saved slot file named {name!r}", 404, "not_found_error")
        payload.update(filename=os.fspath(path), name=name)
    done = (await state.bridge.call(_SLOT_TASKS[action], payload)).payload
    if not isinstance(done, (SlotFileDone, SlotErased)):
        raise TypeError(f"a slot task sent {type(done).__name__}")
    return JSONResponse(done.native())


async def get_lora_adapters(request: Request) -> Response:
    return JSONResponse(request.app.state.pyllama.engine.lora_adapters())


_LORA_LIST = TypeAdapter(list[LoraScale])


async def post_lora_adapters(request: Request) -> Response:
    """Set the scales of requests that name no adapters: ``[{"id": 0, "scale": 0.5}]``; adapters
    not listed get 0 (llama-server's rule)."""
    state: AppState = request.app.state.pyllama
    body = await json_value(request)
    if not isinstance(body, list):
        raise ApiError("Request body must be an array")
    try:
        entries = _LORA_LIST.validate_python(body)
    except ValidationError as exc:
        raise ApiError(f"invalid LoRA entry: {exc.errors()[0]['msg']}") from None
    state.engine.set_lora_scales({e.id: e.scale for e in entries})
    return JSONResponse({"success": True})
