"""A request's sampling fields → llama.cpp's ``common_params_sampling`` (as JSON for the common
shim): sampler names, logit biases, the grammar (GBNF, or a JSON schema converted by llama.cpp),
lazy-grammar triggers and the reasoning budget, read the way llama-server reads them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .params import CompletionParams

__all__ = [
    "DEFAULT_SAMPLERS",
    "SAMPLING_FIELDS",
    "GrammarError",
    "Tokenizer",
    "json_bias",
    "sampler_params",
    "schema_or_any_object",
]


class GrammarError(ValueError):
    """A grammar llama.cpp cannot parse, or a JSON schema it cannot convert to one."""


class Tokenizer(Protocol):
    """What resolving parameters needs from the model (tokens for logit-bias words, EOG ids)."""

    @property
    def n_vocab(self) -> int: ...

    @property
    def eog_tokens(self) -> Sequence[int]: ...

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


def json_bias(bias: float) -> float | None:
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
            raise GrammarError(f'"json_schema": {exc}') from exc
    return p.grammar or "", GRAMMAR_TOOL_CALLS if p.grammar_type == "tool_calls" else GRAMMAR_USER


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


def sampler_params(
    p: CompletionParams, tok: Tokenizer, schema_to_grammar: Callable[[Any], str]
) -> tuple[dict[str, Any], list[tuple[int, float]]]:
    """The request's sampler settings as common_params_sampling JSON (llama.cpp's names), and the
    logit biases they hold (``ignore_eos`` as a -inf bias on every end-of-generation token)."""
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
        logit_bias=[[t, json_bias(b)] for t, b in bias],
        grammar=grammar,
        grammar_type=grammar_type,
        grammar_triggers=triggers,
        preserved_tokens=preserved,
    )
    if p.samplers is not None:
        sampling["samplers"] = _sampler_names(p.samplers)
    if p.generation_prompt is not None:
        sampling["generation_prompt"] = p.generation_prompt
    sampling.update(_reasoning_budget(p, tok))
    return sampling, bias


def _reasoning_budget(p: CompletionParams, tok: Tokenizer) -> dict[str, Any]:
    """The tags as token sequences; the forced sequence is the message then the first end tag,
    set only when the request has a message field (a chat always has one)."""
    ends = p.reasoning_budget_end_tags
    ends = [ends] if isinstance(ends, str) else ends or []
    end_tokens = [tok.tokenize(t, False, True) for t in ends if t]
    out: dict[str, Any] = {
        "reasoning_budget_tokens": p.reasoning_budget_tokens,
        "reasoning_control": p.reasoning_control,
    }
    if p.reasoning_budget_start_tag is not None:
        out["reasoning_budget_start"] = tok.tokenize(p.reasoning_budget_start_tag, False, True)
    if end_tokens:
        out["reasoning_budget_end"] = end_tokens
        if p.reasoning_budget_message is not None:
            message = tok.tokenize(p.reasoning_budget_message, False, True) if p.reasoning_budget_message else []
            out["reasoning_budget_forced"] = message + end_tokens[0]
    return out
