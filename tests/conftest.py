"""Shared fixtures: tiny self-made models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LLAMA_DIR = REPO / "vendor" / "llama.cpp"


# The GPU tier (scripts/gpu_check.sh): every model the tests load is asked for this many layers on
# the GPU, and one that keeps a layer on the CPU fails the test that loaded it.
GPU_LAYERS = os.environ.get("PYLLAMA_TEST_GPU_LAYERS")


@pytest.fixture(scope="session", autouse=True)
def _gpu_tier_offloads_every_layer():
    if GPU_LAYERS is None:
        yield
        return
    from pyllama_yield.llama import Model

    load = Model.__init__

    def load_offloaded(self, *args, **kwargs) -> None:  # noqa: ANN001
        load(self, *args, **kwargs)
        on_cpu = [i for i, dev in enumerate(self.layer_devices) if dev == "CPU"]
        if on_cpu:
            self.close()
            pytest.fail(
                f"GPU tier (PYLLAMA_TEST_GPU_LAYERS={GPU_LAYERS}): {self.path.name} kept layers {on_cpu} of "
                f"{len(self.layer_devices)} on the CPU (llama.cpp's report: {self.layer_devices})"
            )

    Model.__init__ = load_offloaded  # type: ignore[method-assign]
    try:
        yield
    finally:
        Model.__init__ = load  # type: ignore[method-assign]


@pytest.fixture(scope="session", autouse=True)
def _batch_data_of_the_tests_own(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The apps the tests build in-process keep the Batch API's data in the session's folder,
    never in the user's (~/.local/share/pyllama-yield), whose batches they would take up."""
    os.environ["PYLLAMA_DATA_DIR"] = str(tmp_path_factory.mktemp("batch-data"))


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pyllama_yield.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("models") / "tiny.gguf", seed=0)


@pytest.fixture(scope="session")
def tiny_model(tiny_model_path: Path):
    from pyllama_yield.llama import Model

    with Model(tiny_model_path, n_gpu_layers=int(GPU_LAYERS or "-1")) as model:
        yield model


@pytest.fixture(scope="module")
def server(tiny_model_path: Path):
    """A served tiny model (4 slots, API key) and an httpx client for it; checks a clean exit."""
    httpx = pytest.importorskip("httpx")
    from http_server import API_KEY, AUTH, start_server, stop_server

    proc, base = start_server(
        tiny_model_path, "--parallel", "4", "--ctx-size", "8192", "--threads", "1", "--api-key", API_KEY, "--metrics"
    )
    with httpx.Client(base_url=base, headers=AUTH, timeout=120) as client:
        yield client
    out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]
    assert "no thread left" in out
