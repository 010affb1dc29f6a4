"""pyllama-yield: llama.cpp built from source, bound with cffi, served by a yielding queue.

``pyllama_yield.Llama`` is the engine in-process (llama-cpp-python's names and shapes);
``pyllama_yield.ffi`` / ``pyllama_yield.lib`` are the raw llama.h API (compiled in cffi API mode).
They load lazily, so that the pure-Python parts (``pyllama_yield.queue``) import without the
compiled binding.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"


def _add_installed_compiled_parts() -> None:
    """Run from a source checkout (``python -m pyllama_yield`` in the repo root), this directory
    has no compiled parts: let the package also look in the installed copy for them."""
    here = Path(__file__).resolve().parent
    if any(here.glob("_llama_cffi*")):
        return
    for entry in sys.path:
        candidate = (Path(entry) if entry else Path.cwd()).resolve() / "pyllama_yield"
        if candidate != here and any(candidate.glob("_llama_cffi*")):
            __path__.append(str(candidate))
            return


_add_installed_compiled_parts()

_LAZY = {
    "ffi": ("._native", "ffi"),
    "lib": ("._native", "lib"),
    "backends": (".devices", "backends"),
    "system_info": (".devices", "system_info"),
    "build_info": (".devices", "build_info"),
    "module_report": (".devices", "module_report"),
    "Llama": (".client", "Llama"),
    "LlamaGrammar": (".client", "LlamaGrammar"),
    "LlamaState": (".client", "LlamaState"),
}

if TYPE_CHECKING:  # pragma: no cover
    from ._native import ffi, lib
    from .client import Llama, LlamaGrammar, LlamaState
    from .devices import backends, build_info, module_report, system_info

__all__ = [
    "Llama",
    "LlamaGrammar",
    "LlamaState",
    "__version__",
    "backends",
    "build_info",
    "module_report",
    "ffi",
    "lib",
    "system_info",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module_name, attr = _LAZY[name]
        value = getattr(importlib.import_module(module_name, __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pyllama_yield' has no attribute {name!r}")
