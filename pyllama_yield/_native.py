"""Load the compiled binding once: backend init, backend modules, and llama.cpp's log routing.

cffi releases the GIL around every call into ``lib``; nothing here holds it around C code.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# The modules are imported by absolute name: ``from . import <submodule>`` inside the import cycle through
# the package's ``__getattr__`` types as a broken Any under mypy (these modules exist only in a build).
try:
    import pyllama_yield._llama_cffi as _llama_cffi

    from ._llama_cffi import ffi, lib
except ImportError as exc:  # pragma: no cover - only on a broken install
    raise ImportError(
        "pyllama_yield's compiled binding is missing or does not load; build the package with "
        f"`pip install .` (cause: {exc})"
    ) from exc

import pyllama_yield._build_config as _build_config

from .backend_loader import ModuleStatus, load_backend_modules, log_report

# where the compiled parts live (the libraries, backend modules, vocab files)
PACKAGE_DIR = Path(_llama_cffi.__file__).resolve().parent

# llama.cpp log lines go to this logger; the NullHandler keeps it quiet unless the
# application configures logging (the standard library's advice for libraries).
logger = logging.getLogger("pyllama_yield.llama_cpp")
logger.addHandler(logging.NullHandler())

_LEVELS = {
    lib.GGML_LOG_LEVEL_NONE: logging.INFO,
    lib.GGML_LOG_LEVEL_DEBUG: logging.DEBUG,
    lib.GGML_LOG_LEVEL_INFO: logging.INFO,
    lib.GGML_LOG_LEVEL_WARN: logging.WARNING,
    lib.GGML_LOG_LEVEL_ERROR: logging.ERROR,
}


class _LogState(threading.local):
    """Per-thread: llama.cpp builds one line from several calls (GGML_LOG_LEVEL_CONT)."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.level = logging.INFO
        self.capture: list[str] | None = None  # see captured_log_lines()


_log_state = _LogState()
# Recent error/warning lines, so that a failed C call can name its cause in the exception.
_recent_problems: list[str] = []
_recent_lock = threading.Lock()


@ffi.def_extern()
def _pyllama_log_callback(level: int, text, _user_data) -> None:  # noqa: ANN001 - cffi types
    state = _log_state
    if level != lib.GGML_LOG_LEVEL_CONT:
        state.level = _LEVELS.get(level, logging.INFO)
    if state.level < logging.WARNING and state.capture is None and not logger.isEnabledFor(state.level):
        return
    piece = ffi.string(text).decode("utf-8", "replace")
    state.parts.append(piece)
    if not piece.endswith("\n"):
        return
    line = "".join(state.parts).rstrip("\n")
    state.parts.clear()
    if state.capture is not None:
        state.capture.append(line)
    if state.level >= logging.WARNING:
        with _recent_lock:
            _recent_problems.append(line)
            del _recent_problems[:-20]
    logger.log(state.level, "%s", line)


@contextmanager
def captured_log_lines() -> Iterator[list[str]]:
    """Every line llama.cpp logs on this thread inside the block, whatever its level and whether or
    not the logger emits it (a model's load reports where each layer went at debug level)."""
    state = _log_state
    lines: list[str] = []
    outer, state.capture = state.capture, lines
    try:
        yield lines
    finally:
        state.capture = outer


def take_recent_problems() -> list[str]:
    """Warning/error lines llama.cpp logged since the last call (newest last)."""
    with _recent_lock:
        lines = list(_recent_problems)
        _recent_problems.clear()
    return lines


# --- ggml aborts while an engine serves (pyllama_abort_hold in the generated module) -----------
_fatal_listeners: list[Callable[[str], None]] = []
_fatal_lock = threading.Lock()


@ffi.def_extern()
def _pyllama_fatal_callback(message) -> None:  # noqa: ANN001 - cffi char*
    text = ffi.string(message).decode("utf-8", "replace").strip()
    logger.critical("llama.cpp aborted: %s", text)
    with _fatal_lock:
        listeners = list(_fatal_listeners)
    for listener in listeners:
        try:
            listener(text)
        except Exception:  # one listener's fault must not keep the others uninformed
            logger.exception("abort listener failed")


def hold_on_abort(listener: Callable[[str], None]) -> Callable[[], None]:
    """Until the returned function is called, a ggml abort (``GGML_ABORT``/``GGML_ASSERT``, on any
    thread) calls ``listener(message)`` and then parks the aborting thread for good, instead of
    ending the process: an engine whose rpc-server died can still tell its callers why. The
    threads that wait on the parked one stay stuck: the engine is done, only its callers go on.
    The main thread is never parked (on Linux): it would no longer run signal handlers, so an abort
    there ends the process as ggml means it to."""

    def release() -> None:
        with _fatal_lock:
            if listener in _fatal_listeners:
                _fatal_listeners.remove(listener)
            if not _fatal_listeners:
                lib.ggml_set_abort_callback(ffi.NULL)

    with _fatal_lock:
        _fatal_listeners.append(listener)
        lib.ggml_set_abort_callback(lib.pyllama_abort_hold)
    return release


_init_lock = threading.Lock()
_initialized = False
# What each backend module of a GGML_BACKEND_DL build did at load (empty in a build that links
# its backends): pyllama_yield.module_report().
module_report: list[ModuleStatus] = []


def _registered_backends() -> dict[str, int]:
    regs = (lib.ggml_backend_reg_get(i) for i in range(lib.ggml_backend_reg_count()))
    return {ffi.string(lib.ggml_backend_reg_name(r)).decode(): lib.ggml_backend_reg_dev_count(r) for r in regs}


_backend_functions: dict[str, Any] = {}


def backend_function(name: str, backend: str) -> Any:
    """A function of a backend's own header (``ggml-cpu.h``, ``ggml-rpc.h``): the linked one, or, when
    that backend is a module (GGML_BACKEND_DL), the address its registry gives for ``name``, as
    llama.cpp itself finds them, typed by the generated ``pyly_fn_<name>`` (checked against the
    header when the binding was compiled). Raises RuntimeError when the backend or function is not
    there."""
    if hasattr(lib, name):
        return getattr(lib, name)
    if name not in _backend_functions:
        reg = lib.ggml_backend_reg_by_name(backend.encode())
        if reg == ffi.NULL:
            raise RuntimeError(f"this build has no {backend} backend loaded, which {name} belongs to")
        addr = lib.ggml_backend_reg_get_proc_address(reg, name.encode())
        if addr == ffi.NULL:
            raise RuntimeError(f"the {backend} backend does not export {name}")
        _backend_functions[name] = ffi.cast(f"pyly_fn_{name}", addr)
    return _backend_functions[name]


def init() -> None:
    """Route logs, load backend modules (GGML_BACKEND_DL builds), ``llama_backend_init``; idempotent."""
    global _initialized
    with _init_lock:
        if _initialized:
            return
        lib.llama_log_set(lib._pyllama_log_callback, ffi.NULL)
        lib.mtmd_helper_log_set(lib._pyllama_log_callback, ffi.NULL)  # mtmd (clip) logs on its own
        if _build_config.BACKEND_DL:
            module_report[:] = load_backend_modules(
                lib,
                PACKAGE_DIR,
                _build_config.BACKEND_MODULES,
                cuda_major=_build_config.CUDA_MAJOR,
                registered=_registered_backends,
                problems=take_recent_problems,
            )
            log_report(module_report)
        lib.llama_backend_init()
        atexit.register(_shutdown)
        _initialized = True


def _shutdown() -> None:
    lib.llama_backend_free()
    # Destructors that run after the interpreter is gone must not call back into Python.
    lib.llama_log_set(lib.pyllama_log_discard, ffi.NULL)
    lib.mtmd_helper_log_set(lib.pyllama_log_discard, ffi.NULL)


init()
