"""A tool call's arguments, read the way llama-server reads its JSON: ``json_value`` for optional
ones (absent, null or mistyped gives the default) and ``json::at(...).get<T>()`` for required ones
(missing or mistyped throws, which the route answers with a 400)."""

from __future__ import annotations

from typing import Any

from .base import ToolArgumentError

__all__ = ["json_type", "function_definition", "prop", "required", "value_bool", "value_int", "value_str"]


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object" if isinstance(v, dict) else "discarded"


def value_str(params: dict[str, Any], key: str, default: str) -> str:
    """An optional string: absent, null or not a string gives ``default``."""
    v = params.get(key)
    return v if isinstance(v, str) else default


def value_bool(params: dict[str, Any], key: str, default: bool) -> bool:
    v = params.get(key)
    return v if isinstance(v, bool) else default


def value_int(params: dict[str, Any], key: str, default: int) -> int:
    """An optional integer; as nlohmann's get<int>, a float is truncated and a boolean is 0/1."""
    v = params.get(key)
    if not isinstance(v, (bool, int, float)):
        return default
    try:
        return int(v)
    except (OverflowError, ValueError):  # inf/nan, which Python's json accepts
        return default


def required(params: Any, key: str, kind: type = str) -> Any:
    """A required argument (``json::at(key).get<T>()``): missing or mistyped raises
    ToolArgumentError, which the route answers with a 400, as llama-server does."""
    if not isinstance(params, dict):
        raise ToolArgumentError(f"[json.exception.type_error.304] cannot use at() with {json_type(params)}")
    if key not in params:
        raise ToolArgumentError(f"[json.exception.out_of_range.403] key '{key}' not found")
    v = params[key]
    if kind is str and not isinstance(v, str):
        raise ToolArgumentError(f"[json.exception.type_error.302] type must be string, but is {json_type(v)}")
    return v


def function_definition(
    name: str, description: str, properties: dict[str, Any], required_: list[str] | None
) -> dict[str, Any]:
    """An OpenAI function-calling definition, the shape ``Tool.definition`` returns (get_info's has
    no ``required`` list at all, hence None)."""
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required_ is not None:
        parameters["required"] = required_
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def prop(kind: str, description: str) -> dict[str, Any]:
    return {"type": kind, "description": description}
