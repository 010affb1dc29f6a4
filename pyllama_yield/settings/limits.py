"""Limits of ``serve`` that llama-server has no flags for: what one request may ask of the server."""

from __future__ import annotations

from pydantic_settings import BaseSettings

from .fields import arg

__all__ = ["ServerLimits"]


class ServerLimits(BaseSettings):
    """A part of ``ServerSettings``: its fields are flags of ``serve``."""

    max_body_size: int = arg(
        32 << 20,
        "--max-body-size",
        env="PYLLAMA_MAX_BODY_SIZE",
        help="largest request body in bytes; larger ones get a 413 before they are read",
    )
    max_queue: int = arg(
        256,
        "--max-queue",
        env="PYLLAMA_MAX_QUEUE",
        help="requests waiting for a slot beyond the busy ones; more get a 503 with Retry-After",
    )
    n_predict_max: int = arg(
        -1,
        "--n-predict-max",
        env="PYLLAMA_N_PREDICT_MAX",
        help="largest n_predict a request may ask for (-1: no cap but the context)",
    )
    data_dir: str | None = arg(
        None,
        "--data-dir",
        env="PYLLAMA_DATA_DIR",
        help="where the Batch API keeps its files and state (default: $XDG_DATA_HOME/pyllama-yield, "
        "else ~/.local/share/pyllama-yield)",
    )
    n_probs_max: int = arg(
        100, "--n-probs-max", env="PYLLAMA_N_PROBS_MAX", help="largest n_probs / top_logprobs a request may ask for"
    )
