"""Backend modules (GGML_BACKEND_DL): a GPU module that cannot load is reported with its cause, the
package goes on on the CPU, and functions of a module's own header are reached through its registry."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from pyllama_yield import backend_loader
from pyllama_yield._native import PACKAGE_DIR, backend_function, ffi, lib, take_recent_problems
from pyllama_yield.backend_loader import (
    backend_name,
    load_backend_modules,
    nvidia_wheel_dirs,
    preload_cuda_libraries,
)
from pyllama_yield.devices import gpu_unavailable_reason

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="builds an ELF module by hand")

# A dependency no machine has, of the shape a CUDA module's driver dependency has.
MISSING_DRIVER = b"libcuda.so.9"


def _module_needing(missing: bytes, dest: Path) -> Path:
    """A real shared library of this build whose needed ``libpyllama_common.so`` is renamed to
    ``missing`` in its dynamic string table: the dynamic loader then refuses it exactly as it
    refuses a CUDA module on a machine without the driver."""
    source = next(PACKAGE_DIR.glob("_common_cffi*.so"))
    data = source.read_bytes()
    needed = b"libpyllama_common.so\0"
    assert data.count(needed) == 1, "expected one DT_NEEDED string to rename"
    dest.write_bytes(data.replace(needed, missing.ljust(len(needed), b"\0")))
    return dest


def _registered() -> dict[str, int]:
    regs = (lib.ggml_backend_reg_get(i) for i in range(lib.ggml_backend_reg_count()))
    return {ffi.string(lib.ggml_backend_reg_name(r)).decode(): lib.ggml_backend_reg_dev_count(r) for r in regs}


def test_module_names_map_to_ggml_registry_names():
    assert backend_name("ggml-cuda") == "CUDA"
    assert backend_name("ggml-cpu-haswell") == "CPU"
    assert backend_name("ggml-cpu") == "CPU"
    assert backend_name("ggml-rpc") == "RPC"


def test_a_cuda_module_that_cannot_load_is_reported_with_its_cause(tmp_path: Path):
    _module_needing(MISSING_DRIVER, tmp_path / "libggml-cuda.so")
    before = _registered()
    report = load_backend_modules(
        lib, tmp_path, ["ggml-cuda"], cuda_major="13", registered=_registered, problems=take_recent_problems
    )
    assert len(report) == 1
    status = report[0]
    assert status.backend == "CUDA" and not status.loaded and status.devices == 0
    assert status.reason is not None
    assert "libcuda.so.9" in status.reason and "cannot open shared object file" in status.reason
    assert "NVIDIA driver is not installed" in status.reason
    assert status.notes  # where the CUDA runtime would have come from
    assert _registered() == before  # nothing registered; the CPU goes on
    lines = backend_loader.report_lines(report)
    assert lines[0][0] == logging.WARNING and "backend CUDA not used (libggml-cuda.so)" in lines[0][1]


def test_a_missing_runtime_gets_the_extra_as_its_hint(tmp_path: Path):
    _module_needing(b"libcudart.so.99", tmp_path / "libggml-cuda.so")
    [status] = load_backend_modules(
        lib, tmp_path, ["ggml-cuda"], cuda_major="13", registered=_registered, problems=take_recent_problems
    )
    assert not status.loaded
    assert "libcudart.so.99" in (status.reason or "")
    assert "pip install 'pyllama-yield[cuda13]'" in (status.reason or "")


def test_a_module_that_is_not_installed_is_reported(tmp_path: Path):
    [status] = load_backend_modules(
        lib, tmp_path, ["ggml-cuda"], cuda_major="13", registered=_registered, problems=take_recent_problems
    )
    assert not status.loaded and status.reason == "libggml-cuda.so is not installed"


def test_nvidia_wheel_folders_are_found_on_sys_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "site" / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    assert tmp_path / "site" / "nvidia" / "cu13" / "lib" in nvidia_wheel_dirs("13")


def test_cuda_libraries_come_from_nvidia_wheels_when_installed(tmp_path: Path):
    lib_dir = tmp_path / "nvidia" / "cu13" / "lib"
    lib_dir.mkdir(parents=True)
    # the wheel's folder without the libraries: the system's are used
    assert "system's library path" in preload_cuda_libraries("13", [lib_dir])[0]
    # a broken library there is named, not skipped silently
    (lib_dir / "libcudart.so.13").write_bytes(b"not a library")
    note = preload_cuda_libraries("13", [lib_dir])[0]
    assert "did not load" in note and "libcudart.so.13" in note


def test_cpu_header_functions_are_reached_in_every_build():
    new = backend_function("ggml_threadpool_new", "CPU")
    free = backend_function("ggml_threadpool_free", "CPU")
    params = lib.ggml_threadpool_params_default(1)
    pool = new(ffi.addressof(params))
    assert pool != ffi.NULL
    free(pool)


def test_an_unknown_backend_function_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no NOPE backend"):
        backend_function("ggml_nope_function", "NOPE")


def test_offloading_without_a_gpu_warns_and_runs_on_the_cpu(tiny_model_path: Path, caplog: pytest.LogCaptureFixture):
    from pyllama_yield.llama import Model

    if gpu_unavailable_reason() is None:  # pragma: no cover - a machine with a GPU
        pytest.skip("a GPU is available here")
    with caplog.at_level(logging.WARNING, logger="pyllama_yield.llama.model"):
        model = Model(tiny_model_path, n_gpu_layers=99)
    assert model.n_ctx_train > 0
    [record] = [r for r in caplog.records if "n_gpu_layers=99" in r.getMessage()]
    assert "no GPU is available" in record.getMessage() and "runs on the CPU" in record.getMessage()


def test_report_lines_warn_only_for_a_gpu_that_is_not_used():
    from pyllama_yield.backend_loader import ModuleStatus, report_lines

    report = [
        ModuleStatus("ggml-cpu-haswell", "CPU", "/p/libggml-cpu-haswell.so", True, 1),
        ModuleStatus("ggml-cpu-zen4", "CPU", "/p/libggml-cpu-zen4.so", False, 0, "not picked"),
        ModuleStatus("ggml-rpc", "RPC", "/p/libggml-rpc.so", True, 0),  # devices come with --rpc
        ModuleStatus("ggml-cuda", "CUDA", "/p/libggml-cuda.so", True, 0, "no device: no CUDA-capable device"),
    ]
    lines = report_lines(report)
    assert (logging.INFO, "backend CPU: libggml-cpu-haswell.so") in lines
    assert not any("zen4" in text for _, text in lines)  # the variants ggml did not pick are not news
    assert [level for level, text in lines if "RPC" in text] == [logging.INFO]
    assert (logging.WARNING, "backend CUDA not used (libggml-cuda.so): no device: no CUDA-capable device") in lines
