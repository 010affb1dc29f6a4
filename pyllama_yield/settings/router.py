"""The flags of ``serve``'s router mode (llama-server's "Using multiple models"): where models come
from and how many run at once. ``serve`` with no model and any of these is a router."""

from __future__ import annotations

from pydantic_settings import BaseSettings

from .fields import arg

__all__ = ["ROUTER_FIELDS", "RouterSettings"]


class RouterSettings(BaseSettings):
    """A part of ``ServerSettings``: its fields are flags of ``serve``."""

    models_dir: str | None = arg(
        None,
        "--models-dir",
        env="LLAMA_ARG_MODELS_DIR",
        help="router mode: the models in this folder (FILE.gguf, or a sub-folder with its mmproj-*.gguf)",
    )
    models_preset: str | None = arg(
        None,
        "--models-preset",
        env="LLAMA_ARG_MODELS_PRESET",
        help="router mode: an INI file of models and their flags ([*] for all, [name] for one)",
    )
    models_max: int = arg(
        4, "--models-max", env="LLAMA_ARG_MODELS_MAX", help="router mode: models running at once (<= 0: no limit)"
    )
    models_autoload: bool = arg(
        True,
        "--models-autoload",
        neg=("--no-models-autoload",),
        env="LLAMA_ARG_MODELS_AUTOLOAD",
        help="router mode: load a model when a request names it (off: only POST /models/load does)",
    )


# given with no model, any of these makes ``serve`` a router (``--offline``: the models of the
# download cache); without them ``serve`` alone serves its demo model
ROUTER_FIELDS = frozenset({*RouterSettings.model_fields, "offline"})
