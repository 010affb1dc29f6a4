"""The command line of ``serve`` (and ``generate``), built from ``settings.ServerSettings``.

Only the flags given on the command line reach the settings; environment variables
(``LLAMA_ARG_*``) fill in the rest, then the defaults. Flags take llama-server's names and
meanings; a bool with a ``--no-`` form gets both.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import types
import typing
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo

from .server.config import EngineConfig
from .settings import ServerSettings, UnsupportedFlagError

if typing.TYPE_CHECKING:
    from .tools import ServerTools

__all__ = [
    "add_settings_arguments", "engine_config_from_settings", "flags_for", "server_tools", "settings_from_args",
    "settings_from_hub",
]  # fmt: skip


def _value_type(annotation: Any) -> Any:
    """The scalar type argparse should convert to (``int | None`` → int)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and args:
        annotation = args[0]
    if typing.get_origin(annotation) is typing.Literal:
        return str
    if typing.get_origin(annotation) is list:
        return str
    return annotation if annotation in (int, float, str) else str


def _flag_info(info: FieldInfo) -> dict[str, Any]:
    """What ``settings.arg`` keeps in a setting's ``json_schema_extra``: flags, neg, help, supported."""
    extra = info.json_schema_extra
    return extra if isinstance(extra, dict) else {}


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    own = ServerSettings.__annotations__  # the model's and the server's flags first in --help, then the groups'
    for name, info in sorted(ServerSettings.model_fields.items(), key=lambda item: item[0] not in own):
        extra = _flag_info(info)
        flags: list[str] = extra["flags"]
        neg: list[str] = extra["neg"]
        help_text: str | None = extra.get("help") or None
        if extra.get("supported", True) is not True:
            help_text = f"(not available: {extra['supported']})"
        kind = _value_type(info.annotation)
        common: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS, "help": help_text}
        if info.annotation is bool:
            parser.add_argument(*flags, action="store_const", const=True, **common)
            if neg:
                parser.add_argument(*neg, action="store_const", const=False, dest=name, default=argparse.SUPPRESS)
        elif any(typing.get_origin(t) is list for t in (info.annotation, *typing.get_args(info.annotation))):
            parser.add_argument(*flags, action="append", **common)
        else:
            parser.add_argument(*flags, type=kind, **common)


def flags_for(values: dict[str, Any]) -> list[str]:
    """The command line that gives these settings (by field name): what ``add_settings_arguments``
    parses back into them. A bool set to False uses its ``--no-`` form."""
    out: list[str] = []
    for name, value in values.items():
        extra = _flag_info(ServerSettings.model_fields[name])
        flag = extra["flags"][-1]
        if isinstance(value, bool):
            if value:
                out.append(flag)
            elif extra["neg"]:
                out.append(extra["neg"][-1])
        elif isinstance(value, list):
            for item in value:
                out += [flag, str(item)]
        elif value is not None:
            out += [flag, str(value)]
    return out


def settings_from_args(args: argparse.Namespace) -> ServerSettings:
    """Settings from the flags given, the environment, and the defaults; exits with a clear
    message naming the flag for a bad or unsupported value."""
    given = {k: v for k, v in vars(args).items() if k in ServerSettings.model_fields}
    unknown = unknown_environment()
    if unknown:  # a variable we do not read must not be dropped without a word (e.g. a model to fetch)
        raise SystemExit(f"error: {', '.join(unknown)}: not read by this server (unset to start)")
    try:
        return ServerSettings(**given)
    except UnsupportedFlagError as exc:
        raise SystemExit(f"error: {exc}") from None
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            if isinstance(err.get("ctx", {}).get("error"), UnsupportedFlagError):
                problems.append(str(err["ctx"]["error"]))
                continue
            name = str(err["loc"][0]) if err["loc"] else "?"
            field = ServerSettings.model_fields.get(name)
            flag = _flag_info(field)["flags"][-1] if field else name
            problems.append(f"{flag}: {err['msg']}")
        raise SystemExit("error: " + "; ".join(problems)) from None


def unknown_environment() -> list[str]:
    """``LLAMA_ARG_*`` variables set in the environment that no setting declares, sorted."""
    known = {f.validation_alias for f in ServerSettings.model_fields.values() if isinstance(f.validation_alias, str)}
    return sorted(k for k in os.environ if k.startswith("LLAMA_ARG_") and k not in known)


def _proportions(spec: str | None) -> tuple[float, ...]:
    """``--tensor-split 3,1`` (commas or slashes, as llama.cpp splits it)."""
    if not spec:
        return ()
    try:
        return tuple(float(x) for x in re.split(r"[,/]+", spec.strip(",/")))
    except ValueError as exc:
        raise ValueError(f"--tensor-split: {spec!r} is not a list of numbers") from exc


def engine_config_from_settings(settings: ServerSettings, model_path: str | None = None) -> EngineConfig:
    """The engine the flags describe (``model_path`` stands in for ``-m``, e.g. the demo model)."""
    path = model_path or settings.model
    if path is None:
        raise ValueError("no model: pass -m FILE")
    # the one way an EngineConfig is built from flat names, as Llama's keyword arguments build it
    return EngineConfig.create(
        path,
        # the model
        n_gpu_layers=settings.n_gpu_layers,  # negative: all layers (llama.cpp's own reading)
        use_mmap=settings.mmap,
        use_mlock=settings.mlock,
        model_name=settings.aliases[0] if settings.aliases else None,
        mmproj=None if settings.no_mmproj else settings.mmproj,
        mmproj_offload=settings.mmproj_offload,
        image_min_tokens=settings.image_min_tokens,
        image_max_tokens=settings.image_max_tokens,
        rpc_servers=tuple(settings.rpc.split(",")) if settings.rpc else (),
        tensor_split=_proportions(settings.tensor_split),
        # the context
        n_ctx=settings.ctx_size,
        n_parallel=settings.n_parallel,
        kv_unified=settings.unified_kv,
        n_batch=settings.batch_size,
        n_ubatch=settings.ubatch_size,
        n_threads=settings.threads if settings.threads > 0 else None,
        n_threads_batch=settings.threads_batch if settings.threads_batch > 0 else None,
        flash_attn=settings.flash_attn,
        cache_type_k=settings.cache_type_k,
        cache_type_v=settings.cache_type_v,
        swa_full=settings.swa_full,
        # drafting
        draft_model_path=settings.model_draft,
        n_draft=settings.spec_draft_n_max,
        n_draft_min=settings.spec_draft_n_min,
        synth_rates=settings.synth_rates,
        # chat
        chat_template=settings.chat_template_text(),
        use_jinja=settings.jinja,
        reasoning_format=settings.reasoning_format,
        enable_thinking={"on": True, "off": False}.get(settings.reasoning),
        # the cache
        cache_ram_mib=settings.cache_ram,
        cache_idle_slots=settings.cache_idle_slots,
        slot_prompt_similarity=settings.slot_prompt_similarity,
        context_shift=settings.context_shift,
        ctx_checkpoints=settings.ctx_checkpoints,
        checkpoint_min_step=settings.checkpoint_min_step,
        # limits
        n_predict_max=settings.n_predict_max,
        n_probs_max=settings.n_probs_max,
        idle_sleep_ms=settings.sleep_idle_seconds * 1000 if settings.sleep_idle_seconds > 0 else -1,
        warmup=settings.warmup,
        # the engine as a whole
        defaults=settings.completion_defaults(),
        embedding=settings.embedding or settings.reranking,
        pooling="rank" if settings.reranking else settings.pooling,
        lora=settings.lora_adapters,
    )


def settings_from_hub(settings: ServerSettings) -> ServerSettings:
    """``-hf``: the settings with the downloaded (or cached) model, and its projector unless
    ``--mmproj`` or ``--no-mmproj`` says otherwise; ``-hfd``: the draft model, ``-md`` naming
    its file in that repo as llama.cpp has it. Settings without them come back as they are.
    ``hub.HubError`` when a model cannot be had."""
    from . import hub

    update: dict[str, Any] = {}
    if settings.hf_repo and not settings.model:
        got = hub.download(
            settings.hf_repo,
            settings.hf_file,
            token=settings.hf_token,
            offline=settings.offline,
            mmproj=not settings.no_mmproj,
        )
        update = {"model": str(got.path), "mmproj": settings.mmproj or (str(got.mmproj) if got.mmproj else None)}
    if settings.hf_repo_draft:
        draft = hub.download(
            settings.hf_repo_draft,
            settings.model_draft,
            token=settings.hf_token,
            offline=settings.offline,
            mmproj=False,
        )
        update["model_draft"] = str(draft.path)
    return settings.model_copy(update=update) if update else settings


def server_tools(settings: ServerSettings) -> ServerTools | None:
    """What ``/tools`` serves (a single model's server, or a router): the ``--tools`` built-ins and
    the MCP servers' tools (their warm-up runs here, before the server listens); None when neither
    is configured. Raises ValueError for a bad tool name, runtime or MCP config: the server must
    not start then."""
    from .tools import McpServers, ServerTools, load_mcp_configs

    configs = load_mcp_configs(settings.mcp_servers_config, settings.mcp_servers_json)
    if not settings.server_tools and not configs:
        return None
    mcp = McpServers(configs).start() if configs else None
    try:
        tools = ServerTools.build(settings.server_tools, mcp, settings.tools_runtime)
    except BaseException:
        if mcp is not None:
            mcp.close()
        raise
    on = {"server tools": settings.server_tools, "tools runtime": settings.tools_runtime, "MCP servers": mcp}
    print(
        f"warning: experimental features enabled: {', '.join(f for f, v in on.items() if v)}; do not expose this "
        "server to untrusted clients",
        file=sys.stderr,
    )
    return tools
