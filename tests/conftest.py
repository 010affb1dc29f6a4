"""Shared fixtures: the installed package (not the source tree) and tiny self-made models."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LLAMA_DIR = REPO / "vendor" / "llama.cpp"


def pytest_configure(config: pytest.Config) -> None:
    import pyllama_yield

    pkg = Path(pyllama_yield.__file__).resolve().parent
    if pkg == REPO / "pyllama_yield" and not list(pkg.glob("_llama_cffi*")):
        raise pytest.UsageError(
            "the tests imported pyllama_yield from the source tree, which has no compiled binding; "
            "install it (`pip install .`) and run `pytest` from the repo root (not `python -m pytest`)"
        )


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pyllama_yield.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("models") / "tiny.gguf", seed=0)


@pytest.fixture(scope="session")
def tiny_model(tiny_model_path: Path):
    from pyllama_yield.llama import Model

    with Model(tiny_model_path) as model:
        yield model
