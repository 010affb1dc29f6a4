"""A request's fields (``CompletionParams``, merged over the server's defaults) resolved into what
the server context runs a completion with (``TaskParams``): the sampler under llama.cpp's C++
names for ``common.CommonSampler``, and the ``generation_settings`` llama-server reports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .params import CompletionParams
from .sampling import DEFAULT_SAMPLERS, SAMPLING_FIELDS, Tokenizer, json_bias, sampler_params

__all__ = ["TaskParams", "resolve"]


@dataclass
class TaskParams:
    """What the server context needs to run one completion; built by :func:`resolve`."""

    n_predict: int = -1
    n_cmpl: int = 1  # the request's n: choices per prompt (a task's index is prompt × n + choice)
    stream: bool = False
    cache_prompt: bool = True
    id_slot: int = -1
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False
    n_probs: int = 0
    post_sampling_probs: bool = False
    prompt_logprobs: int = -1  # -1: off
    return_tokens: bool = False
    return_progress: bool = False
    timings_per_token: bool = False
    include_usage: bool = False
    verbose: bool = False
    n_indent: int = 0
    n_keep: int = 0
    n_discard: int = 0
    n_cache_reuse: int = 0
    t_max_predict_ms: int = -1
    response_fields: list[str] = field(default_factory=list)
    sampling: dict[str, Any] = field(default_factory=dict)  # common_params_sampling, C++ names
    settings: dict[str, Any] = field(default_factory=dict)  # echoed as generation_settings
    lora: dict[int, float] | None = None  # adapter id -> scale; None: the server's scales
    priority: int = 0  # lower is sooner
    user: str = ""  # who asked, by the request's own word (OpenAI's "user")
    report_position: bool = False  # told its place while it waits for a slot (queue_report.py)


def resolve(
    p: CompletionParams,
    tok: Tokenizer,
    schema_to_grammar: Callable[[Any], str],
    *,
    n_parallel: int,
) -> TaskParams:
    """Request fields (already merged over the server defaults) → the task's parameters."""
    if p.n_cmpl > n_parallel:
        raise ValueError(f"Field 'n_cmpl': Value must be between 1 <= value <= {n_parallel}, but got {p.n_cmpl}")
    stop = [p.stop] if isinstance(p.stop, str) else [s for s in p.stop if s]
    sampling, bias = sampler_params(p, tok, schema_to_grammar)
    return TaskParams(
        n_predict=p.n_predict,
        n_cmpl=p.n_cmpl,
        stream=p.stream,
        cache_prompt=p.cache_prompt,
        id_slot=p.id_slot,
        stop=stop,
        ignore_eos=p.ignore_eos,
        n_probs=max(0, p.n_probs),
        post_sampling_probs=p.post_sampling_probs,
        prompt_logprobs=p.prompt_logprobs,
        return_tokens=p.return_tokens,
        return_progress=p.return_progress,
        timings_per_token=p.timings_per_token,
        include_usage=p.stream_options.include_usage if p.stream_options else False,
        verbose=p.verbose,
        n_indent=p.n_indent,
        n_keep=p.n_keep,
        n_discard=p.n_discard,
        n_cache_reuse=p.n_cache_reuse,
        t_max_predict_ms=p.t_max_predict_ms,
        response_fields=p.response_fields,
        sampling=sampling,
        settings=_generation_settings(p, sampling, stop, bias),
        lora={e.id: e.scale for e in p.lora} if p.lora else None,  # an empty list: the server's scales
        priority=p.priority,
        user=p.user or "",
    )


def _generation_settings(
    p: CompletionParams, sampling: dict[str, Any], stop: list[str], bias: list[tuple[int, float]]
) -> dict[str, Any]:
    """``generation_settings`` as llama-server reports it (its names, not llama.cpp's)."""
    return {
        **{name: getattr(p, name) for name in SAMPLING_FIELDS},
        "dry_base": sampling["dry_base"],
        "stop": stop,
        "max_tokens": p.n_predict,
        "n_predict": p.n_predict,
        "n_keep": p.n_keep,
        "n_discard": p.n_discard,
        "stream": p.stream,
        "logit_bias": [{"bias": json_bias(b), "token": t} for t, b in bias],
        "grammar": sampling["grammar"],
        "grammar_triggers": p.grammar_triggers,
        "preserved_tokens": [],
        "chat_format": "Content-only",
        "reasoning_format": "none",
        "reasoning_in_content": False,
        "generation_prompt": p.generation_prompt or "",
        "samplers": sampling.get("samplers", DEFAULT_SAMPLERS),
        "speculative.types": "none",
        "timings_per_token": p.timings_per_token,
        "post_sampling_probs": p.post_sampling_probs,
        "backend_sampling": p.backend_sampling,
        "lora": [e.model_dump() for e in p.lora or []],
    }
