#!/usr/bin/env python3
"""Stand-in for llama-server used by scripts/upstream_server_tests.sh.

llama.cpp's server test suite (tools/server/tests) starts ``$LLAMA_SERVER_BIN_PATH`` with
llama-server's argv and asks for tiny models that it downloads from Hugging Face. We run the
suite offline on one local model, so this file has two roles:

1. Run as a program (the suite's ``LLAMA_SERVER_BIN_PATH``): swap the model-fetching flags for
   ``-m $UPSTREAM_MODEL`` and exec the server named by ``$UPSTREAM_TARGET``:
     llama  build/llama-server/bin/llama-server   (or $UPSTREAM_LLAMA_SERVER)
     ours   .venv/bin/python -m pyllama_yield serve   (python: $UPSTREAM_OURS_PYTHON)
   Every other flag is passed through unchanged to both servers, so the comparison is honest:
   a flag our CLI does not accept fails the test, as it would for a user.
2. Loaded as a pytest plugin (``-p upstream_server_shim``): stop the suite from downloading.

exec keeps the pid, so the suite's terminate()/kill() reaches the real server.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Flags (each takes one value) that name where the main model comes from. The suite's presets use
# --hf-repo/--hf-file; a few tests use --model/--model-url.
MODEL_FLAGS = {
    "-m",
    "--model",
    "-mu",
    "--model-url",
    "-hf",
    "-hfr",
    "--hf-repo",
    "-hff",
    "--hf-file",
    "-dr",
    "--docker-repo",
}
# The same for the draft model of speculative decoding.
DRAFT_FLAGS = {"-md", "--model-draft", "--spec-draft-model", "-hfd", "-hfrd", "--hf-repo-draft", "--spec-draft-hf"}
# Multimodal projector downloads: our one model is text-only, so the projector is dropped
# (the vision tests then fail for both servers alike).
DROP_FLAGS = {"-mmu", "--mmproj-url"}


def rewrite_args(argv: list[str], model: str) -> list[str]:
    """argv without the model-source flags, then -m MODEL (and a draft, if one was asked for)."""
    out: list[str] = []
    had_model = had_draft = False
    i = 0
    while i < len(argv):
        flag, eq, _ = argv[i].partition("=")
        if flag in MODEL_FLAGS | DRAFT_FLAGS | DROP_FLAGS:
            had_model |= flag in MODEL_FLAGS
            had_draft |= flag in DRAFT_FLAGS
            i += 1 if eq else 2  # "--flag=value" or "--flag value"
            continue
        out.append(argv[i])
        i += 1
    # No model flag at all is the suite's router mode (models loaded on demand): leave it so.
    if had_model:
        out += ["-m", model]
    if had_draft:
        # The same model drafts for itself: the suite's own spelling of the draft flag.
        out += ["--model-draft", model]
    return out


def main() -> None:
    model = os.environ.get("UPSTREAM_MODEL") or str(ROOT / "build/models/gemma-3-270m-q4_k_m.gguf")
    target = os.environ.get("UPSTREAM_TARGET", "llama")
    args = rewrite_args(sys.argv[1:], model)
    if target == "llama":
        exe = os.environ.get("UPSTREAM_LLAMA_SERVER") or str(ROOT / "build/llama-server/bin/llama-server")
        cmd = [exe, *args]
    elif target == "ours":
        py = os.environ.get("UPSTREAM_OURS_PYTHON") or str(ROOT / ".venv/bin/python")
        cmd = [py, "-m", "pyllama_yield", "serve", *args]
        # the checkout's Python code (compiled parts come from the installed copy), as the tests use it
        os.environ["PYTHONPATH"] = str(ROOT)
    else:
        sys.exit(f"upstream_server_shim: UPSTREAM_TARGET must be 'llama' or 'ours', not {target!r}")
    print("upstream_server_shim: exec", " ".join(cmd), file=sys.stderr, flush=True)
    os.execv(cmd[0], cmd)


# --- pytest plugin part -------------------------------------------------------------------------


def pytest_sessionstart(session) -> None:
    """Patch the suite's helpers (its utils.py, imported by its conftest) before tests import them."""
    import utils  # tools/server/tests/utils.py: the runner puts that folder on PYTHONPATH

    # conftest's session fixture starts every preset once to fill the download cache. Nothing is
    # downloaded here, and a preset our server cannot start (embedding, reranking, router, ...)
    # would error every test of the file instead of only the tests that use it.
    utils.ServerPreset.load_all = staticmethod(lambda: None)

    # download_file() fetches draft models and LoRA adapters with wget. Models are local: hand back
    # the local model for a .gguf (the shim maps it anyway); anything else fails, as it would offline.
    real_download = utils.download_file

    def download_file(url: str, output_file_path: str | None = None) -> str:
        if url.endswith(".gguf"):
            return os.environ.get("UPSTREAM_MODEL") or str(ROOT / "build/models/gemma-3-270m-q4_k_m.gguf")
        return real_download(url, output_file_path)

    utils.download_file = download_file


if __name__ == "__main__":
    main()
