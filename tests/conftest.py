"""Shared fixtures: tiny self-made models."""

from __future__ import annotations

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

    with Model(tiny_model_path) as model:
        yield model
