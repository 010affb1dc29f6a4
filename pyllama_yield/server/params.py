"""Completion parameters: every llama-server request field, its type, range and default, in one place.

The port of llama-server's completion schema (``server-schema.cpp``) as a pydantic model. Its
rules, which clients rely on:
- a field that is absent or ``null`` takes the server's default (the CLI's sampling settings);
- unknown fields are ignored, a value of the wrong type is an error;
- a soft range clamps (``top_p: 7`` means 1), a hard range is an error (``n_predict: -5``).
``task_params.resolve`` then turns a request into ``TaskParams``: what the server context needs,
with llama.cpp's sampler fields under their C++ names for ``common.CommonSampler``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

INT32_MAX = 2**31 - 1
PRIORITY_LIMIT = 2**20  # a request's priority is within ±this; the Batch API runs at +this (the last)

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


def _soft(lo: float, hi: float) -> AfterValidator:
    """A soft range (``Annotated[Num, _soft(lo, hi)]``): out-of-range values are clamped, as llama-server does."""
    return AfterValidator(_clamp(lo, hi))


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
    t_max_predict_ms: Annotated[Int, Field(ge=-1, le=INT32_MAX)] = -1
    response_fields: list[str] = Field(default_factory=list)
    id_slot: Int = -1
    stop: list[str] | str = Field(default_factory=list)
    n_probs: Int = Field(0, validation_alias=AliasChoices("n_probs", "logprobs"))
    post_sampling_probs: Bool = False
    # ours (vLLM's name): logprobs of the prompt's own tokens, with this many alternatives each
    prompt_logprobs: Annotated[Int, Field(ge=-1, le=INT32_MAX)] = -1
    # ours, for many users (queue/fair_share.py): vLLM's priority (lower is sooner) and OpenAI's
    # end-user id (the tenant fair share counts by when the server has no API keys)
    priority: Annotated[Int, Field(ge=-PRIORITY_LIMIT, le=PRIORITY_LIMIT)] = 0
    user: str | None = None

    # --- sampling (llama.cpp's names on the right, in TaskParams.sampling)
    temperature: Annotated[Num, _soft(0.0, math.inf)] = 0.8  # temp
    dynatemp_range: Num = 0.0
    dynatemp_exponent: Num = 1.0
    top_k: Annotated[Int, _soft(0, INT32_MAX)] = 40
    top_p: Annotated[Num, _soft(0.0, 1.0)] = 0.95
    min_p: Annotated[Num, _soft(0.0, 1.0)] = 0.05
    top_n_sigma: Num = -1.0
    typical_p: Num = 1.0  # typ_p
    xtc_probability: Annotated[Num, _soft(0.0, 1.0)] = 0.0
    xtc_threshold: Annotated[Num, _soft(0.0, 1.0)] = 0.1
    repeat_last_n: Annotated[Int, Field(ge=0, le=INT32_MAX)] = 64  # penalty_last_n
    repeat_penalty: Num = 1.0  # penalty_repeat
    frequency_penalty: Num = 0.0  # penalty_freq
    presence_penalty: Num = 0.0  # penalty_present
    dry_multiplier: Num = 0.0
    dry_base: Num = 1.75
    dry_allowed_length: Annotated[Int, Field(ge=0, le=INT32_MAX)] = 2
    dry_penalty_last_n: Annotated[Int, Field(ge=0, le=INT32_MAX)] = 64
    dry_sequence_breakers: list[str] = Field(default_factory=lambda: ["\n", ":", '"', "*"], min_length=1)
    mirostat: Annotated[Int, _soft(0, 2)] = 0
    mirostat_tau: Num = 5.0
    mirostat_eta: Num = 0.1
    adaptive_target: Annotated[Num, _soft(-math.inf, 1.0)] = -1.0
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

    # the reasoning budget: thinking tokens allowed between the start tag and an end tag, after
    # which the message and the first end tag are forced (-1: no limit)
    reasoning_budget_tokens: Annotated[Int, Field(ge=-1, le=INT32_MAX)] = -1
    reasoning_budget_start_tag: str | None = None
    reasoning_budget_end_tags: list[str] | str | None = Field(
        None, validation_alias=AliasChoices("reasoning_budget_end_tags", "reasoning_budget_end_tag")
    )
    reasoning_budget_message: str | None = None
    reasoning_control: Bool = False

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


def validation_message(exc: ValidationError) -> str:
    """pydantic's errors as llama-server words them: "Field 'top_k': <reason>"."""
    parts = []
    for err in exc.errors():
        name = ".".join(str(x) for x in err["loc"] if not isinstance(x, int)) or "request"
        parts.append(f"Field '{name}': {err['msg']}")
    return "; ".join(parts)
