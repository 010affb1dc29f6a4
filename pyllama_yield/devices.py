"""What the installed build can run on: ggml backends and their devices, read from ggml at run time, and
what each backend module did at load (a wheel's GPU module that did not load says why)."""

from __future__ import annotations

from dataclasses import dataclass

from . import _native
from ._native import _build_config, ffi, lib
from .backend_loader import ModuleStatus

_DEVICE_TYPES = {
    lib.GGML_BACKEND_DEVICE_TYPE_CPU: "cpu",
    lib.GGML_BACKEND_DEVICE_TYPE_GPU: "gpu",
    lib.GGML_BACKEND_DEVICE_TYPE_IGPU: "igpu",
    lib.GGML_BACKEND_DEVICE_TYPE_ACCEL: "accel",
    lib.GGML_BACKEND_DEVICE_TYPE_META: "meta",
}


@dataclass(frozen=True)
class Device:
    name: str
    description: str
    type: str
    memory_free: int
    memory_total: int


@dataclass(frozen=True)
class Backend:
    name: str
    devices: tuple[Device, ...]


def _text(ptr) -> str:  # noqa: ANN001 - cffi char*
    return "" if ptr == ffi.NULL else ffi.string(ptr).decode("utf-8", "replace")


def _device(dev) -> Device:  # noqa: ANN001 - cffi ggml_backend_dev_t
    free, total = ffi.new("size_t *"), ffi.new("size_t *")
    lib.ggml_backend_dev_memory(dev, free, total)
    return Device(
        name=_text(lib.ggml_backend_dev_name(dev)),
        description=_text(lib.ggml_backend_dev_description(dev)),
        type=_DEVICE_TYPES.get(lib.ggml_backend_dev_type(dev), "unknown"),
        memory_free=free[0],
        memory_total=total[0],
    )


def _reg_devices(reg) -> tuple[Device, ...]:  # noqa: ANN001 - cffi ggml_backend_reg_t
    return tuple(_device(lib.ggml_backend_reg_dev_get(reg, j)) for j in range(lib.ggml_backend_reg_dev_count(reg)))


def backends() -> list[Backend]:
    """The registered ggml backends with their devices (e.g. ``CPU``, ``CUDA``, ``RPC``)."""
    regs = (lib.ggml_backend_reg_get(i) for i in range(lib.ggml_backend_reg_count()))
    return [Backend(name=_text(lib.ggml_backend_reg_name(reg)), devices=_reg_devices(reg)) for reg in regs]


def module_report() -> list[ModuleStatus]:
    """What each backend module of this build did at load: loaded (with how many devices) or why
    not (``libcuda.so.1: cannot open shared object file (the NVIDIA driver is not installed)``,
    ``no device``...). Empty in a build that links its backends (a plain ``pip install .``)."""
    return list(_native.module_report)


def gpu_unavailable_reason() -> str | None:
    """None when a GPU (or other offload device) is registered; else why not, in one line, for a
    warning where layers were asked to be offloaded."""
    if any(d.type in ("gpu", "igpu") for b in backends() for d in b.devices):
        return None
    gpu_modules = [s for s in _native.module_report if s.backend != "CPU"]
    reasons = [f"{s.backend}: {s.reason}" for s in gpu_modules if s.reason]
    if reasons:
        return "; ".join(reasons)
    if not _build_config.BACKEND_DL and not lib.llama_supports_gpu_offload():
        return "this build has no GPU backend (built for the CPU)"
    return "no GPU device found"


def system_info() -> str:
    """llama.cpp's one-line summary of CPU features and compiled-in backends."""
    return _text(lib.llama_print_system_info()).strip()


def build_info() -> dict[str, object]:
    """How this package's llama.cpp was built."""
    return {
        "llama_cpp_commit": _build_config.LLAMA_COMMIT,
        "llama_cpp_build_number": _build_config.LLAMA_BUILD_NUMBER,
        "ggml_version": _text(lib.ggml_version()),
        "backend_dl": _build_config.BACKEND_DL,
        "linked_libraries": list(_build_config.LINKED_LIBRARIES),
        "backend_modules": list(_build_config.BACKEND_MODULES),
        "cuda_major": _build_config.CUDA_MAJOR or None,
        "build_type": _build_config.BUILD_TYPE,
        "compiler": _build_config.C_COMPILER,
        "supports_gpu_offload": bool(lib.llama_supports_gpu_offload()),
        "supports_mmap": bool(lib.llama_supports_mmap()),
        "supports_rpc": bool(lib.llama_supports_rpc()),
    }
