"""llama-cpp-python's argument names → ours: the ``Llama`` constructor's into an ``EngineConfig``,
a call's sampling arguments into the engine's request fields (llama-server's names)."""

from __future__ import annotations

import os
from typing import Any

from ..llama import builtin_chat_templates
from ..server.config import EngineConfig
from ..server.params import CompletionParams

__all__ = ["CHAT_DEFAULTS", "COMPLETION_DEFAULTS", "engine_config_from_kwargs", "sampling_fields"]

# llama-cpp-python's llama_pooling_type and ggml_type numbers, for callers that pass its constants
_POOLING = {-1: None, 0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}
_GGML_TYPES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 30: "bf16"}

# llama-cpp-python arguments this engine does not have: accepted at their default, refused otherwise
_NOT_HONOURED: dict[str, Any] = {
    "split_mode": 1,
    "main_gpu": 0,
    "tensor_split": None,
    "vocab_only": False,
    "kv_overrides": None,
    "rope_scaling_type": -1,
    "rope_freq_base": 0.0,
    "rope_freq_scale": 0.0,
    "yarn_ext_factor": -1.0,
    "yarn_attn_factor": 1.0,
    "yarn_beta_fast": 32.0,
    "yarn_beta_slow": 1.0,
    "yarn_orig_ctx": 0,
    "attention_type": -1,
    "offload_kqv": True,
    "op_offload": None,
    "lora_base": None,
    "numa": False,
    "chat_handler": None,
    "tokenizer": None,
    "spm_infill": False,
}
# accepted and without effect here: logprobs need no switch, performance counters are free,
# llama.cpp's log goes to the ``logging`` logger ``pyllama_yield.llama_cpp`` whatever ``verbose``
_NO_EFFECT = {"logits_all", "no_perf", "verbose"}


def engine_config_from_kwargs(
    model_path: str | os.PathLike[str], n_parallel: int, seed: int, **kw: Any
) -> EngineConfig:
    """An engine config from ``Llama``'s keyword arguments (llama-cpp-python's names). ``n_ctx`` is
    each slot's context, as llama-cpp-python's is its one sequence's: the engine gets
    ``n_ctx × n_parallel``."""
    for name, default in _NOT_HONOURED.items():
        if name in kw and kw.pop(name) != default:
            raise NotImplementedError(f"Llama({name}=...) is not supported by pyllama-yield")
    for name in _NO_EFFECT:
        kw.pop(name, None)
    n_ctx = kw.pop("n_ctx", 512)
    if n_ctx < 0:
        raise ValueError(f"n_ctx must be >= 0, got {n_ctx}")
    pooling = kw.pop("pooling_type", -1)
    flash = kw.pop("flash_attn", None)  # None: llama.cpp decides (as llama-server); a bool: on or off
    n_gpu = kw.pop("n_gpu_layers", 0)
    lora_path, lora_scale = kw.pop("lora_path", None), kw.pop("lora_scale", 1.0)
    chat_template, chat_format = kw.pop("chat_template", None), kw.pop("chat_format", None)
    draft = kw.pop("draft_model", None)
    mmproj = kw.pop("mmproj", None) or kw.pop("clip_model_path", None)  # the projector, by either name
    if draft is not None and not isinstance(draft, (str, os.PathLike)):
        raise TypeError("draft_model must be the path of a GGUF draft model (prompt-lookup drafting is not built)")
    options: dict[str, Any] = {
        "n_ctx": n_ctx * n_parallel,
        "n_parallel": n_parallel,
        "n_batch": kw.pop("n_batch", 512),
        "n_ubatch": kw.pop("n_ubatch", 512),
        "n_threads": kw.pop("n_threads", None),
        "n_threads_batch": kw.pop("n_threads_batch", None),
        "n_gpu_layers": n_gpu,  # negative: all layers (llama.cpp's own reading)
        "use_mmap": kw.pop("use_mmap", True) and lora_path is None,
        "use_mlock": kw.pop("use_mlock", False),
        "rpc_servers": tuple((kw.pop("rpc_servers", None) or "").split(",")),
        "mmproj": None if mmproj is None else os.fspath(mmproj),
        "tensor_split": tuple(kw.pop("tensor_split", None) or ()),
        "embedding": kw.pop("embedding", False),
        "pooling": _POOLING.get(pooling, pooling) if isinstance(pooling, int) else pooling,
        "flash_attn": "auto" if flash is None else flash if isinstance(flash, str) else ("on" if flash else "off"),
        "cache_type_k": _ggml_type(kw.pop("type_k", None)),
        "cache_type_v": _ggml_type(kw.pop("type_v", None)),
        "swa_full": bool(kw.pop("swa_full", False)),
        "chat_template": chat_template or _chat_format(chat_format),
        "draft_model_path": draft,
        "lora": [(lora_path, lora_scale)] if lora_path else [],
        "defaults": CompletionParams(seed=seed, repeat_last_n=kw.pop("last_n_tokens_size", 64)),
        "cache_ram_mib": kw.pop("cache_ram_mib", 0),
    }
    if "n_draft" in kw:
        options["n_draft"] = kw.pop("n_draft")
    if kw:
        raise TypeError(f"Llama() got unexpected keyword arguments: {', '.join(sorted(kw))}")
    return EngineConfig.create(model_path, **options)


# llama-cpp-python's chat_format names → llama.cpp's built-in templates (its other names are the same)
_CHAT_FORMATS = {
    "llama-2": "llama2",
    "llama-3": "llama3",
    "mistral-instruct": "mistral-v1",
    "qwen": "chatml",
    "chatml-function-calling": "chatml",  # a named tool_choice is forced by its schema on any template
}


def _chat_format(name: str | None) -> str | None:
    """A ``chat_format`` as the llama.cpp template of that name (the model's own template: None)."""
    if name is None:
        return None
    builtin = builtin_chat_templates()
    template = _CHAT_FORMATS.get(name, name)
    if template not in builtin:
        raise ValueError(
            f"unknown chat_format {name!r}: llama.cpp has {', '.join(builtin)} "
            "(or pass the Jinja text as chat_template=)"
        )
    return template


def _ggml_type(value: int | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value not in _GGML_TYPES:
        raise ValueError(f"unknown ggml type {value} for the KV cache")
    return _GGML_TYPES[value]


# llama-cpp-python's sampling arguments and their defaults, for completions and for chats
COMPLETION_DEFAULTS: dict[str, Any] = {
    "max_tokens": 16,
    "temperature": 0.8,
    "top_p": 0.95,
    "min_p": 0.05,
    "typical_p": 1.0,
    "top_k": 40,
    "stop": None,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "repeat_penalty": 1.0,
    "seed": None,
    "mirostat_mode": 0,
    "mirostat_tau": 5.0,
    "mirostat_eta": 0.1,
    "logit_bias": None,
    "tfs_z": 1.0,  # tail-free sampling: gone from llama.cpp; only its "off" value is accepted
    "logits_processor": None,
    "stopping_criteria": None,
}
CHAT_DEFAULTS = {**COMPLETION_DEFAULTS, "max_tokens": None, "temperature": 0.2}


def sampling_fields(defaults: dict[str, Any], **given: Any) -> dict[str, Any]:
    """A call's sampling arguments (over ``defaults``) as request fields; ``max_tokens`` None or
    <= 0: no limit but the context."""
    unknown = set(given) - set(defaults)
    if unknown:
        raise TypeError(f"unexpected keyword arguments: {', '.join(sorted(unknown))}")
    a = {**defaults, **given}
    for name in ("logits_processor", "stopping_criteria"):
        if a[name] is not None:
            raise NotImplementedError(
                f"{name} runs Python for every token of one sequence; the batched engine does not call it "
                "(use grammar, logit_bias or stop instead)"
            )
    if a["tfs_z"] != 1.0:  # llama-cpp-python takes it and does nothing; a value that does nothing is refused
        raise NotImplementedError(
            f"tfs_z={a['tfs_z']}: tail-free sampling was removed from llama.cpp (use min_p or top_p instead)"
        )
    stop, max_tokens = a["stop"], a["max_tokens"]
    fields: dict[str, Any] = {
        "n_predict": max_tokens if max_tokens is not None and max_tokens > 0 else -1,
        "stop": [stop] if isinstance(stop, str) else list(stop or []),
        "mirostat": a["mirostat_mode"],
        "logit_bias": [[int(k), v] for k, v in (a["logit_bias"] or {}).items()],
        **{k: a[k] for k in ("temperature", "top_p", "min_p", "typical_p", "top_k", "frequency_penalty",
                             "presence_penalty", "repeat_penalty", "mirostat_tau", "mirostat_eta")},
    }  # fmt: skip
    if a["seed"] is not None:
        fields["seed"] = a["seed"]
    return fields
