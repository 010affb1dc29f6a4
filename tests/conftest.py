"""Shared fixtures: tiny self-made models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LLAMA_DIR = REPO / "vendor" / "llama.cpp"


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pyllama_yield.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("models") / "tiny.gguf", seed=0)


@pytest.fixture(scope="session")
def tiny_model(tiny_model_path: Path):
    from pyllama_yield.llama import Model

    with Model(tiny_model_path, n_gpu_layers=int(os.environ.get("PYLLAMA_TEST_GPU_LAYERS", "0"))) as model:
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
