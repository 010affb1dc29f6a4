"""How a setting is declared: its llama-server flags, ``--no-`` forms, environment variable and help,
kept on the pydantic field so that ``cli.py`` can build the argument parser from the settings."""

from __future__ import annotations

from typing import Any

from pydantic import Field

__all__ = ["NOT_YET", "UnsupportedFlagError", "arg", "lora_scaled"]


class UnsupportedFlagError(ValueError):
    """A llama-server flag that this server cannot honour (yet)."""


def arg(
    default: Any,
    *flags: str,
    env: str | None = None,
    neg: tuple[str, ...] = (),
    help: str = "",  # noqa: A002 - argparse's name
    supported: bool | str = True,
) -> Any:
    """A setting with its llama-server flags. ``supported`` is False for a flag we cannot honour,
    or a reason string; such a setting must keep its default."""
    return Field(
        default,
        validation_alias=env,  # the environment variable; flags and code use the field's name
        json_schema_extra={"flags": list(flags), "neg": list(neg), "help": help, "supported": supported},
    )


NOT_YET = "not supported by pyllama-yield yet"


def lora_scaled(spec: str) -> tuple[str, float]:
    """``FNAME:SCALE`` of ``--lora-scaled`` (the last colon splits, so paths may hold colons)."""
    path, _, scale = spec.rpartition(":")
    try:
        if path:
            return path, float(scale)
    except ValueError:
        pass
    raise ValueError(f"expected FNAME:SCALE, got {spec!r}")
