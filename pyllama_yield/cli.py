"""The command line of ``serve`` (and ``generate``), built from ``settings.ServerSettings``.

Only the flags given on the command line reach the settings; environment variables
(``LLAMA_ARG_*``) fill in the rest, then the defaults. Flags take llama-server's names and
meanings; a bool with a ``--no-`` form gets both.
"""

from __future__ import annotations

import argparse
import types
import typing
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo

from .settings import ServerSettings, UnsupportedFlagError

__all__ = ["add_settings_arguments", "settings_from_args"]


def _value_type(annotation: Any) -> Any:
    """The scalar type argparse should convert to (``int | None`` → int)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and args:
        annotation = args[0]
    if typing.get_origin(annotation) is typing.Literal:
        return str
    if typing.get_origin(annotation) is list:
        return str
    return annotation if annotation in (int, float, str) else str


def _flag_info(info: FieldInfo) -> dict[str, Any]:
    """What ``settings.arg`` keeps in a setting's ``json_schema_extra``: flags, neg, help, supported."""
    extra = info.json_schema_extra
    return extra if isinstance(extra, dict) else {}


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    for name, info in ServerSettings.model_fields.items():
        extra = _flag_info(info)
        flags: list[str] = extra["flags"]
        neg: list[str] = extra["neg"]
        help_text: str | None = extra.get("help") or None
        if extra.get("supported", True) is not True:
            help_text = f"(not available: {extra['supported']})"
        kind = _value_type(info.annotation)
        common: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS, "help": help_text}
        if info.annotation is bool:
            parser.add_argument(*flags, action="store_const", const=True, **common)
            if neg:
                parser.add_argument(*neg, action="store_const", const=False, dest=name, default=argparse.SUPPRESS)
        elif any(typing.get_origin(t) is list for t in (info.annotation, *typing.get_args(info.annotation))):
            parser.add_argument(*flags, action="append", **common)
        else:
            parser.add_argument(*flags, type=kind, **common)


def settings_from_args(args: argparse.Namespace) -> ServerSettings:
    """Settings from the flags given, the environment, and the defaults; exits with a clear
    message naming the flag for a bad or unsupported value."""
    given = {k: v for k, v in vars(args).items() if k in ServerSettings.model_fields}
    try:
        return ServerSettings(**given)
    except UnsupportedFlagError as exc:
        raise SystemExit(f"error: {exc}") from None
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            if isinstance(err.get("ctx", {}).get("error"), UnsupportedFlagError):
                problems.append(str(err["ctx"]["error"]))
                continue
            name = str(err["loc"][0]) if err["loc"] else "?"
            field = ServerSettings.model_fields.get(name)
            flag = _flag_info(field)["flags"][-1] if field else name
            problems.append(f"{flag}: {err['msg']}")
        raise SystemExit("error: " + "; ".join(problems)) from None
