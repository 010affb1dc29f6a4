"""The sampling flags of ``serve``: per-request defaults (a request's own fields win), turned into
``CompletionParams`` by ``ServerSettings.completion_defaults``. A flag that sets a request field
starts from that field's own default (``request_default``): the value is declared once, in
``server.params.CompletionParams``."""

from __future__ import annotations

from typing import Any

from pydantic_settings import BaseSettings

from ..server.params import CompletionParams
from .fields import arg

__all__ = ["RequestDefaults"]


def request_default(field: str) -> Any:
    """The default of request field ``field`` (``CompletionParams``)."""
    return CompletionParams.model_fields[field].default


class RequestDefaults(BaseSettings):
    """A part of ``ServerSettings``: its fields are flags of ``serve``."""

    n_predict: int = arg(
        request_default("n_predict"),
        "-n",
        "--predict",
        "--n-predict",
        env="LLAMA_ARG_N_PREDICT",
        help="tokens to predict",
    )
    temp: float = arg(request_default("temperature"), "--temp", "--temperature", env="LLAMA_ARG_TEMPERATURE")
    top_k: int = arg(request_default("top_k"), "--top-k", env="LLAMA_ARG_TOP_K")
    top_p: float = arg(request_default("top_p"), "--top-p", env="LLAMA_ARG_TOP_P")
    min_p: float = arg(request_default("min_p"), "--min-p", env="LLAMA_ARG_MIN_P")
    typical: float = arg(request_default("typical_p"), "--typical", "--typical-p")
    seed: int = arg(-1, "-s", "--seed", help="-1: a random seed per request")
    repeat_last_n: int = arg(request_default("repeat_last_n"), "--repeat-last-n")
    repeat_penalty: float = arg(request_default("repeat_penalty"), "--repeat-penalty", env="LLAMA_ARG_REPEAT_PENALTY")
    presence_penalty: float = arg(
        request_default("presence_penalty"), "--presence-penalty", env="LLAMA_ARG_PRESENCE_PENALTY"
    )
    frequency_penalty: float = arg(
        request_default("frequency_penalty"), "--frequency-penalty", env="LLAMA_ARG_FREQUENCY_PENALTY"
    )
    dry_multiplier: float = arg(request_default("dry_multiplier"), "--dry-multiplier")
    mirostat: int = arg(request_default("mirostat"), "--mirostat")
    ignore_eos: bool = arg(request_default("ignore_eos"), "--ignore-eos")
    samplers: str | None = arg(None, "--samplers", help="';'-separated sampler names")
    grammar: str | None = arg(None, "--grammar", help="GBNF applied to every request")
    json_schema: str | None = arg(None, "-j", "--json-schema", help="JSON schema applied to every request")
    keep: int = arg(request_default("n_keep"), "--keep", help="prompt tokens kept on a context shift")
