"""The sampling flags of ``serve``: per-request defaults (a request's own fields win), turned into
``CompletionParams`` by ``ServerSettings.completion_defaults``."""

from __future__ import annotations

from pydantic_settings import BaseSettings

from .fields import arg

__all__ = ["RequestDefaults"]


class RequestDefaults(BaseSettings):
    """A part of ``ServerSettings``: its fields are flags of ``serve``."""

    n_predict: int = arg(-1, "-n", "--predict", "--n-predict", env="LLAMA_ARG_N_PREDICT", help="tokens to predict")
    temp: float = arg(0.8, "--temp", "--temperature", env="LLAMA_ARG_TEMPERATURE")
    top_k: int = arg(40, "--top-k", env="LLAMA_ARG_TOP_K")
    top_p: float = arg(0.95, "--top-p", env="LLAMA_ARG_TOP_P")
    min_p: float = arg(0.05, "--min-p", env="LLAMA_ARG_MIN_P")
    typical: float = arg(1.0, "--typical", "--typical-p")
    seed: int = arg(-1, "-s", "--seed", help="-1: a random seed per request")
    repeat_last_n: int = arg(64, "--repeat-last-n")
    repeat_penalty: float = arg(1.0, "--repeat-penalty", env="LLAMA_ARG_REPEAT_PENALTY")
    presence_penalty: float = arg(0.0, "--presence-penalty", env="LLAMA_ARG_PRESENCE_PENALTY")
    frequency_penalty: float = arg(0.0, "--frequency-penalty", env="LLAMA_ARG_FREQUENCY_PENALTY")
    dry_multiplier: float = arg(0.0, "--dry-multiplier")
    mirostat: int = arg(0, "--mirostat")
    ignore_eos: bool = arg(False, "--ignore-eos")
    samplers: str | None = arg(None, "--samplers", help="';'-separated sampler names")
    grammar: str | None = arg(None, "--grammar", help="GBNF applied to every request")
    json_schema: str | None = arg(None, "-j", "--json-schema", help="JSON schema applied to every request")
    keep: int = arg(0, "--keep", help="prompt tokens kept on a context shift")
