"""Completion parameters: every llama-server request field, its type, range and default, in one place.

The port of llama-server's completion schema (``server-schema.cpp``) as a pydantic model. Its
rules, which clients rely on:
- a field that is absent or ``null`` takes the server's default (the CLI's sampling settings);
- unknown fields are ignored, a value of the wrong type is an error;
- a soft range clamps (``top_p: 7`` means 1), a hard range is an error (``n_predict: -5``).
``CompletionParams.resolve`` then turns a request into ``TaskParams``: what the server context
needs, with llama.cpp's sampler fields under their C++ names for ``common.CommonSampler``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol

from pydantic import AfterValidator, AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

INT32_MAX = 2**31 - 1
DEFAULT_SEED = 0xFFFFFFFF  # LLAMA_DEFAULT_SEED: a random seed per request


def _integer(v: Any) -> Any:
    """JSON numbers become integers the way llama-server reads them (fractions truncate);
    booleans and strings are type errors."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("must be a number")
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError("must be finite")
        return int(v)
    return v


def _number(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("must be a number")
    return float(v)


def _boolean(v: Any) -> Any:
    if not isinstance(v, bool):
        raise ValueError("must be a boolean")
    return v


def _clamp(lo: float, hi: float) -> Callable[[Any], Any]:
    def clamp(v: Any) -> Any:
        return min(max(v, lo), hi)

    return clamp


Int = Annotated[int, BeforeValidator(_integer)]
Num = Annotated[float, BeforeValidator(_number)]
Bool = Annotated[bool, BeforeValidator(_boolean)]


def _soft(base: Any, lo: float, hi: float) -> Any:
    """A soft range: out-of-range values are clamped, as llama-server does."""
    return Annotated[base, AfterValidator(_clamp(lo, hi))]


def _seed(v: Any) -> Any:
    v = _integer(v)
    return v & 0xFFFFFFFF  # -1 (and any negative) wraps like llama-server's uint32 seed


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: Bool = False


class LoraScale(BaseModel):
    """One entry of a request's ``lora`` list (llama-server's parse_lora_request defaults)."""

    id: int = -1
    scale: float = 0.0


class CompletionParams(BaseModel):
    """llama-server's native completion fields (also read on the OpenAI routes)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    # --- output and flow
    stream: Bool = False
    stream_options: StreamOptions | None = None
    cache_prompt: Bool = True
    return_tokens: Bool = False
    return_progress: Bool = False
    timings_per_token: Bool = False
    verbose: Bool = False  # adds __verbose (the native answer) to OpenAI answers
    sse_ping_interval: Annotated[Int, Field(ge=-1, le=INT32_MAX)] = -1
    n_predict: Annotated[Int, Field(ge=-1, le=INT32_MAX)] = Field(
        -1, validation_alias=AliasChoices("n_predict", "max_completion_tokens", "max_tokens")
    )
    n_indent: Annotated[Int, Field(ge=0, le=INT32_MAX)] = 0
    n_keep: Annotated[Int, Field(ge=-1, le=INT32_MAX)] = 0
    n_discard: Annotated[Int, Field(ge=0, le=INT32_MAX)] = 0
    n_cache_reuse: Annotated[Int, Field(ge=0, le=INT32_MAX)] = 0  # --cache-reuse
    n_cmpl: Annotated[Int, Field(ge=1, le=INT32_MAX)] = Field(1, validation_alias=AliasChoices("n_cmpl", "n"))
    n_cache_reuse: Annotated[Int, Field(ge=0, le=INT32_MAX)] = 0
    t_max_predict_ms: Annotated[Int, Field(ge=-1, le=INT32_MAX)] = -1
    response_fields: list[str] = Field(default_factory=list)
    id_slot: Int = -1
    stop: list[str] | str = Field(default_factory=list)
    n_probs: Int = Field(0, validation_alias=AliasChoices("n_probs", "logprobs"))
    post_sampling_probs: Bool = False

    # --- sampling (llama.cpp's names on the right, in TaskParams.sampling)
    temperature: _soft(Num, 0.0, math.inf) = 0.8  # temp
    dynatemp_range: Num = 0.0
    dynatemp_exponent: Num = 1.0
    top_k: _soft(Int, 0, INT32_MAX) = 40
    top_p: _soft(Num, 0.0, 1.0) = 0.95
    min_p: _soft(Num, 0.0, 1.0) = 0.05
    top_n_sigma: Num = -1.0
    typical_p: Num = 1.0  # typ_p
    xtc_probability: _soft(Num, 0.0, 1.0) = 0.0
    xtc_threshold: _soft(Num, 0.0, 1.0) = 0.1
    repeat_last_n: Annotated[Int, Field(ge=0, le=INT32_MAX)] = 64  # penalty_last_n
    repeat_penalty: Num = 1.0  # penalty_repeat
    frequency_penalty: Num = 0.0  # penalty_freq
    presence_penalty: Num = 0.0  # penalty_present
    dry_multiplier: Num = 0.0
    dry_base: Num = 1.75
    dry_allowed_length: Annotated[Int, Field(ge=0, le=INT32_MAX)] = 2
    dry_penalty_last_n: Annotated[Int, Field(ge=0, le=INT32_MAX)] = 64
    dry_sequence_breakers: list[str] = Field(default_factory=lambda: ["\n", ":", '"', "*"], min_length=1)
    mirostat: _soft(Int, 0, 2) = 0
    mirostat_tau: Num = 5.0
    mirostat_eta: Num = 0.1
    adaptive_target: _soft(Num, -math.inf, 1.0) = -1.0
    adaptive_decay: Annotated[Num, Field(ge=0.0, le=0.99)] = 0.9
    seed: Annotated[int, BeforeValidator(_seed)] = DEFAULT_SEED
    min_keep: Annotated[Int, Field(ge=0, le=INT32_MAX)] = 0
    ignore_eos: Bool = False
    samplers: list[str] | str | None = None
    logit_bias: list[Any] | dict[str, Any] | None = None
    backend_sampling: Bool = False

    # --- constrained output
    grammar: str | None = None
    json_schema: dict[str, Any] | list[Any] | bool | None = None
    grammar_lazy: Bool = False
    grammar_type: str | None = None
    grammar_triggers: list[dict[str, Any] | str] = Field(default_factory=list)
    preserved_tokens: list[str] = Field(default_factory=list)
    generation_prompt: str | None = None

    # LoRA adapters for this request, [{"id": i, "scale": s}]: adapters not named get scale 0
    lora: list[LoraScale] | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, data: Any) -> Any:
        # llama-server treats a null field as absent, so clients can ask for the server default
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data

    def over(self, defaults: CompletionParams) -> CompletionParams:
        """These request fields on top of the server's defaults (only the fields that were sent)."""
        return defaults.model_copy(update={name: getattr(self, name) for name in self.model_fields_set})


@dataclass
class TaskParams:
    """What the server context needs to run one completion; built by :func:`resolve`."""

    n_predict: int = -1
    stream: bool = False
    cache_prompt: bool = True
    id_slot: int = -1
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False
    n_probs: int = 0
    post_sampling_probs: bool = False
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


class Tokenizer(Protocol):
    """What resolving parameters needs from the model (tokens for logit-bias words, EOG ids)."""

    @property
    def n_vocab(self) -> int: ...

    @property
    def eog_tokens(self) -> list[int]: ...

    def tokenize(self, text: str, add_special: bool = False, parse_special: bool = False) -> list[int]: ...


def _sampler_names(samplers: list[str] | str) -> list[str]:
    """Sampler names for common_sampler (a string gives one character per sampler, as in llama.cpp)."""
    if isinstance(samplers, list):
        return samplers
    chars = {
        "d": "dry",
        "k": "top_k",
        "p": "top_p",
        "s": "top_n_sigma",
        "y": "typ_p",
        "m": "min_p",
        "t": "temperature",
        "x": "xtc",
        "i": "infill",
        "e": "penalties",
        "a": "adaptive_p",
    }
    return [chars[c] for c in samplers if c in chars]


def _bias_value(v: Any) -> float | None:
    if isinstance(v, bool):
        return -math.inf if v is False else None  # `false` bans a token; `true` means nothing
    if isinstance(v, (int, float)):
        return float(v)
    return None


def _logit_bias(raw: list[Any] | dict[str, Any] | None, tok: Tokenizer) -> list[tuple[int, float]]:
    """llama-server's two forms: ``[[token_or_text, bias], ...]`` and ``{"token_or_text": bias}``;
    entries it cannot read are skipped, as llama-server skips them."""
    if raw is None:
        return []
    pairs = raw.items() if isinstance(raw, dict) else [tuple(e) for e in raw if isinstance(e, list) and len(e) == 2]
    out: list[tuple[int, float]] = []
    for key, value in pairs:
        bias = _bias_value(value)
        if bias is None:
            continue
        if isinstance(key, str) and not (isinstance(raw, dict) and key.lstrip("-").isdigit()):
            out += [(t, bias) for t in tok.tokenize(key)]
            continue
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            continue
        token = int(key)
        if 0 <= token < tok.n_vocab:
            out.append((token, bias))
    return out


def _json_bias(bias: float) -> float | None:
    return None if math.isinf(bias) else bias  # JSON has no infinity: null (as llama.cpp writes it)


# request field → its common_params_sampling name, for the sampler fields passed on as they are
SAMPLING_FIELDS = {
    "seed": "seed",
    "n_probs": "n_probs",
    "min_keep": "min_keep",
    "top_k": "top_k",
    "top_p": "top_p",
    "min_p": "min_p",
    "top_n_sigma": "top_n_sigma",
    "xtc_probability": "xtc_probability",
    "xtc_threshold": "xtc_threshold",
    "typical_p": "typ_p",
    "temperature": "temp",
    "dynatemp_range": "dynatemp_range",
    "dynatemp_exponent": "dynatemp_exponent",
    "repeat_last_n": "penalty_last_n",
    "repeat_penalty": "penalty_repeat",
    "frequency_penalty": "penalty_freq",
    "presence_penalty": "penalty_present",
    "dry_multiplier": "dry_multiplier",
    "dry_allowed_length": "dry_allowed_length",
    "dry_penalty_last_n": "dry_penalty_last_n",
    "dry_sequence_breakers": "dry_sequence_breakers",
    "mirostat": "mirostat",
    "mirostat_tau": "mirostat_tau",
    "mirostat_eta": "mirostat_eta",
    "adaptive_target": "adaptive_target",
    "adaptive_decay": "adaptive_decay",
    "ignore_eos": "ignore_eos",
    "grammar_lazy": "grammar_lazy",
}
GRAMMAR_USER, GRAMMAR_OUTPUT_FORMAT, GRAMMAR_TOOL_CALLS = 1, 2, 3  # common_grammar_type


def schema_or_any_object(schema: Any) -> Any:
    """llama-server reads an empty JSON schema as "any object"."""
    return {"type": "object"} if schema == {} else schema


def _grammar(p: CompletionParams, schema_to_grammar: Callable[[Any], str]) -> tuple[str, int]:
    """The request's grammar and its kind: ``grammar`` as given, else ``json_schema`` converted."""
    if p.json_schema is not None and "grammar" not in p.model_fields_set:
        try:
            return schema_to_grammar(schema_or_any_object(p.json_schema)), GRAMMAR_OUTPUT_FORMAT
        except ValueError as exc:
            raise ValueError(f'"json_schema": {exc}') from exc
    return p.grammar or "", GRAMMAR_TOOL_CALLS if p.grammar_type == "tool_calls" else GRAMMAR_USER


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
    bias = _logit_bias(p.logit_bias, tok)
    if p.ignore_eos:
        bias += [(t, -math.inf) for t in tok.eog_tokens]
    grammar, grammar_type = _grammar(p, schema_to_grammar)
    preserved, triggers = _lazy_grammar(p, tok)
    if p.grammar_lazy and grammar and not triggers:
        raise ValueError("Error: no triggers set for lazy grammar!")
    sampling: dict[str, Any] = {cxx: getattr(p, name) for name, cxx in SAMPLING_FIELDS.items()}
    sampling.update(
        dry_base=p.dry_base if p.dry_base >= 1.0 else 1.75,  # below 1: llama-server's default
        logit_bias=[[t, _json_bias(b)] for t, b in bias],
        grammar=grammar,
        grammar_type=grammar_type,
        grammar_triggers=triggers,
        preserved_tokens=preserved,
    )
    if p.samplers is not None:
        sampling["samplers"] = _sampler_names(p.samplers)
    if p.generation_prompt is not None:
        sampling["generation_prompt"] = p.generation_prompt
    return TaskParams(
        n_predict=p.n_predict,
        stream=p.stream,
        cache_prompt=p.cache_prompt,
        id_slot=p.id_slot,
        stop=stop,
        ignore_eos=p.ignore_eos,
        n_probs=max(0, p.n_probs),
        post_sampling_probs=p.post_sampling_probs,
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
    )


TRIGGER_TOKEN, TRIGGER_WORD = 0, 1  # common_grammar_trigger_type


def _lazy_grammar(p: CompletionParams, tok: Tokenizer) -> tuple[list[int], list[dict[str, Any]]]:
    """Tokens a lazy grammar keeps whole, and its triggers; a trigger word that is one token
    becomes a token trigger (and must be a preserved token), as in llama-server."""
    preserved = []
    for text in p.preserved_tokens:
        ids = tok.tokenize(text, False, True)
        if len(ids) == 1:
            preserved.append(ids[0])
    triggers = []
    for t in p.grammar_triggers:
        t = {"type": TRIGGER_WORD, "value": t} if isinstance(t, str) else dict(t)
        if t.get("type") == TRIGGER_WORD:
            ids = tok.tokenize(str(t.get("value", "")), False, True)
            if len(ids) == 1:
                if ids[0] not in preserved:
                    raise ValueError(f"Grammar trigger word should be marked as preserved token: {t.get('value')}")
                t = {"type": TRIGGER_TOKEN, "value": t["value"], "token": ids[0]}
        triggers.append(
            {
                "type": int(t.get("type", TRIGGER_WORD)),
                "value": str(t.get("value", "")),
                "token": int(t.get("token", -1)),
            }
        )
    return preserved, triggers


DEFAULT_SAMPLERS = ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"]


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
        "logit_bias": [{"bias": _json_bias(b), "token": t} for t, b in bias],
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
