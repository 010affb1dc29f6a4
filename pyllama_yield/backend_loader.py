"""Loading ggml's backend modules (``GGML_BACKEND_DL`` builds) and saying what each one did.

A wheel carries its backends as modules: one CPU module per x86 feature level (ggml loads the best
one the running CPU supports) and, in a CUDA wheel, ``libggml-cuda.so``. A GPU module that cannot
load must not stop the package: ggml's own loader skips it silently and the package runs on the
CPU. This module keeps the reason, so that ``pyllama_yield.module_report()``, ``info``
and ``serve``'s start-up log can say *why* a GPU is not used (no driver, no CUDA runtime, no
device) instead of leaving the user to guess.

The CUDA runtime and cuBLAS a CUDA module needs may come from NVIDIA's wheels (the ``cuda13``
extra: ``nvidia/cu13/lib`` in site-packages), as the field's big frameworks take them; they are
loaded first, by path, so that the module's ``libcudart.so.13`` resolves to them. Without those
wheels the system's libraries (a CUDA toolkit on the loader's path) are used.

This module does not import the compiled binding: ``_native`` hands it ``lib``/``ffi``.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import util as import_util
from pathlib import Path
from typing import Any

log = logging.getLogger("pyllama_yield.backends")

# The NVIDIA wheels' libraries a CUDA module links, in dependency order, by CUDA major version.
_NVIDIA_WHEEL_LIBS = {"13": ("libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13")}

# Backends that start with no device by design, and where their devices come from.
_DEVICES_ADDED_LATER = {"RPC": "its devices are the rpc-servers given with --rpc"}

# What a missing library means to the user, and what to do about it.
_HINTS = (
    ("libcuda.so", "the NVIDIA driver is not installed (or not visible in this container)"),
    ("libcudart.so", "no CUDA runtime: pip install 'pyllama-yield[cuda{major}]', or a CUDA {major} toolkit"),
    ("libcublas", "no cuBLAS: pip install 'pyllama-yield[cuda{major}]', or a CUDA {major} toolkit"),
)


@dataclass(frozen=True)
class ModuleStatus:
    """One backend module of this build: whether ggml registered it, and if not (or with no
    device), why."""

    module: str  # the CMake target, e.g. "ggml-cuda", "ggml-cpu-haswell"
    backend: str  # ggml's registry name, e.g. "CUDA", "CPU"
    path: str
    loaded: bool
    devices: int = 0
    reason: str | None = None  # why it is not used: a load error, or "no device"
    notes: tuple[str, ...] = field(default=())  # e.g. where the CUDA runtime came from


def backend_name(module: str) -> str:
    """ggml's registry name for a module target: ``ggml-cuda`` -> ``CUDA``, ``ggml-cpu-*`` -> ``CPU``."""
    name = module.removeprefix("ggml-")
    return "CPU" if name == "cpu" or name.startswith("cpu-") else name.upper()


def module_file(directory: Path, module: str) -> Path:
    if sys.platform == "win32":
        return directory / f"{module}.dll"
    return directory / f"lib{module}{'.dylib' if sys.platform == 'darwin' else '.so'}"


def nvidia_wheel_dirs(major: str) -> list[Path]:
    """``nvidia/cu<major>/lib`` folders of NVIDIA's wheels on ``sys.path`` (a namespace package)."""
    spec = import_util.find_spec("nvidia")
    if spec is None or spec.submodule_search_locations is None:
        return []
    roots = [Path(p) / f"cu{major}" for p in spec.submodule_search_locations]
    return [root / "lib" for root in roots if root.is_dir()]


def preload_cuda_libraries(major: str, folders: Sequence[Path] | None = None) -> list[str]:
    """Load the CUDA runtime and cuBLAS from NVIDIA's wheels (``folders``: their ``lib`` folders on
    ``sys.path``), when installed; notes on what was used."""
    names = _NVIDIA_WHEEL_LIBS.get(major, ())
    for folder in nvidia_wheel_dirs(major) if folders is None else folders:
        found = [folder / name for name in names if (folder / name).exists()]
        if not found:
            continue
        for path in found:
            try:
                ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                return [f"CUDA libraries in {folder} did not load: {exc}"]
        return [f"CUDA runtime and cuBLAS from {folder}"]
    return [f"CUDA {major} runtime and cuBLAS from the system's library path (no NVIDIA wheels installed)"]


def _with_hint(error: str, cuda_major: str) -> str:
    for needle, hint in _HINTS:
        if needle in error:
            return f"{error} ({hint.format(major=cuda_major or '13')})"
    return error


def dlopen_error(path: Path) -> str | None:
    """Why the dynamic loader refuses ``path`` (e.g. ``libcuda.so.1: cannot open shared object
    file``), or None when it loads. The module is then loaded in this process, as ggml's loader
    would have done; nothing of it runs."""
    if not path.exists():
        return f"{path.name} is not installed"
    try:
        ctypes.CDLL(str(path))
    except OSError as exc:
        return str(exc)
    return None


def _mapped_files(directory: Path) -> set[str]:
    """File names under ``directory`` mapped into this process (Linux), to tell which CPU variant
    ggml picked; empty where /proc is not there."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return set()
    prefix = str(directory.resolve()) + "/"
    return {Path(line.split()[-1]).name for line in maps.splitlines() if line.split()[-1].startswith(prefix)}


def load_backend_modules(
    lib: Any,
    directory: Path,
    modules: Sequence[str],
    *,
    cuda_major: str = "",
    registered: Callable[[], dict[str, int]],
    problems: Callable[[], list[str]],
) -> list[ModuleStatus]:
    """Load the modules in ``directory`` with ggml's loader and report on each of ``modules``.

    ``registered()`` gives the registered backends with their device counts; ``problems()`` the
    warning/error lines llama.cpp logged since the last call (ggml's CUDA module says there why it
    found no device)."""
    notes = preload_cuda_libraries(cuda_major) if any(backend_name(m) == "CUDA" for m in modules) else []
    problems()
    lib.ggml_backend_load_all_from_path(str(directory).encode())
    logged = problems()
    regs = registered()
    mapped = _mapped_files(directory)
    report: list[ModuleStatus] = []
    for module in modules:
        backend, path = backend_name(module), module_file(directory, module)
        if backend == "CPU":
            # ggml loads one CPU variant: the best the running CPU supports; the others stay unloaded.
            chosen = path.name in mapped
            reason = None if chosen else "not picked: ggml loads the best CPU variant this processor supports"
            report.append(ModuleStatus(module, backend, str(path), chosen, regs.get("CPU", 0) if chosen else 0, reason))
            continue
        extra = tuple(notes) if backend == "CUDA" else ()
        if backend in regs:
            devices = regs[backend]
            why = None
            if devices == 0 and backend not in _DEVICES_ADDED_LATER:
                said = [line for line in logged if backend.lower() in line.lower()]
                why = "no device" + (f": {said[-1]}" if said else "")
            report.append(ModuleStatus(module, backend, str(path), True, devices, why, extra))
            continue
        error = dlopen_error(path) or "the module loaded but did not register a backend"
        report.append(ModuleStatus(module, backend, str(path), False, 0, _with_hint(error, cuda_major), extra))
    return report


def report_lines(report: Sequence[ModuleStatus]) -> list[tuple[int, str]]:
    """(logging level, text): one line per backend that runs, a warning per GPU module that does
    not, and where its CUDA libraries came from."""
    lines: list[tuple[int, str]] = []
    for status in report:
        name = Path(status.path).name
        if status.backend == "CPU":
            if status.loaded:
                lines.append((logging.INFO, f"backend CPU: {name}"))
            continue
        if status.loaded and status.backend in _DEVICES_ADDED_LATER:
            lines.append((logging.INFO, f"backend {status.backend}: {name} ({_DEVICES_ADDED_LATER[status.backend]})"))
        elif status.loaded and status.devices:
            lines.append((logging.INFO, f"backend {status.backend}: {name}, {status.devices} device(s)"))
        else:
            lines.append((logging.WARNING, f"backend {status.backend} not used ({name}): {status.reason}"))
        lines += [(logging.INFO, f"backend {status.backend}: {note}") for note in status.notes]
    return lines


def log_report(report: Sequence[ModuleStatus]) -> None:
    for level, text in report_lines(report):
        log.log(level, "%s", text)
