"""Corrupted GGUF files opened through ``Model``: always a Python exception naming the file and the
cause, never a crash. Each file is opened in its own process, so a crash shows as a signal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from gguf_corpus import corpus

REPO = Path(__file__).resolve().parents[1]

OPEN = """
import sys
from pyllama_yield.llama import Model
try:
    Model(sys.argv[1]).close()
except Exception as exc:  # the outcome we want: a Python exception
    print("EXC", type(exc).__name__, exc)
    sys.exit(0)
print("LOADED")
"""


@pytest.fixture(scope="module")
def bad_files(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return corpus(tiny_model_path, tmp_path_factory.mktemp("corpus"))


def test_the_corpus_covers_each_kind_of_damage(bad_files):
    names = set(bad_files)
    assert {"truncated_at_header", "truncated_at_mid_kv", "truncated_at_mid_tensor_infos"} <= names
    assert {"bad_magic", "version_99", "huge_tensor_count", "huge_kv_count", "huge_string_length"} <= names
    assert {"unknown_value_type", "tensor_type_unknown", "tensor_offset_past_end"} <= names
    assert len(names) >= 25


def test_every_corrupted_file_is_a_python_error(bad_files):
    outcomes = {}
    for name, path in sorted(bad_files.items()):
        proc = subprocess.run(
            [sys.executable, "-c", OPEN, str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
        outcomes[name] = (proc.returncode, proc.stdout.strip().splitlines()[-1:] or [proc.stderr[-300:]])
    crashed = {n: o for n, o in outcomes.items() if o[0] != 0}
    assert not crashed, crashed
    for name, (_, out) in outcomes.items():
        assert out[0].startswith("EXC ModelLoadError") and f"{name}.gguf" in out[0], (name, out)
    # the cause is llama.cpp's own first complaint, e.g. which tensor has which bad type
    assert "invalid ggml type 4242" in outcomes["tensor_type_unknown"][1][0]
    assert "unsupported GGUF version 99" in outcomes["version_99"][1][0]
