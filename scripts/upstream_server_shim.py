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
   Vision: with ``$UPSTREAM_MMPROJ`` set, a server the suite starts for a multimodal model (the
   ``tinygemma3`` preset, whose projector the HF registry supplies, or any ``--mmproj-url``) gets
   ``-m $UPSTREAM_VISION_MODEL`` (default ``$UPSTREAM_MODEL``) ``--mmproj $UPSTREAM_MMPROJ``
   instead, unless the suite asked for ``--no-mmproj``. Without it the projector is dropped.
2. Loaded as a pytest plugin (``-p upstream_server_shim``): stop the suite from downloading and,
   with ``$UPSTREAM_MMPROJ`` set, serve its test images (see ``_image_mirror``). Router mode (a
   server started with no model) finds models in the download cache, which the suite fills from
   huggingface.co before its tests: here the cache is filled with the local model under the
   suite's names, and a stand-in for the Hub on 127.0.0.1 (``tests/hub_standin.py``) answers the
   router's downloads (``POST /models``), for both servers alike (see ``_hub``).

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
# Multimodal projector downloads: dropped; replaced by --mmproj $UPSTREAM_MMPROJ when that is set
# (without it the vision tests fail for both servers alike).
DROP_FLAGS = {"-mmu", "--mmproj-url"}
HF_REPO_FLAGS = {"-hf", "-hfr", "--hf-repo"}
# Repositories of the suite's presets for which the HF registry supplies a projector (the
# tinygemma3 preset gives only --hf-repo: llama-server fetches the mmproj along with the model).
VISION_HF_REPOS = {"ggml-org/tinygemma3-gguf"}
# Repositories that hold a preset.ini (llama.cpp's remote presets: -hf of one runs the router on
# it): kept as they are, the Hub stand-in serves them (see _hub).
PRESET_HF_REPOS = {"ggml-org/test-preset-ci"}


def rewrite_args(argv: list[str], model: str, mmproj: str | None = None, vision_model: str | None = None) -> list[str]:
    """argv without the model-source flags, then -m MODEL (and a draft, if one was asked for).
    With ``mmproj``, a multimodal request (a VISION_HF_REPOS repo or --mmproj-url, and no
    --no-mmproj) gets ``-m vision_model --mmproj mmproj`` instead."""
    out: list[str] = []
    had_model = had_draft = wants_mmproj = False
    i = 0
    while i < len(argv):
        flag, eq, value = argv[i].partition("=")
        if flag in MODEL_FLAGS | DRAFT_FLAGS | DROP_FLAGS:
            if not eq:
                value = argv[i + 1] if i + 1 < len(argv) else ""
            if flag in HF_REPO_FLAGS and value.partition(":")[0].lower() in PRESET_HF_REPOS:
                out += argv[i : i + (1 if eq else 2)]
                i += 1 if eq else 2
                continue
            had_model |= flag in MODEL_FLAGS
            had_draft |= flag in DRAFT_FLAGS
            wants_mmproj |= flag in DROP_FLAGS
            wants_mmproj |= flag in HF_REPO_FLAGS and value.partition(":")[0].lower() in VISION_HF_REPOS
            i += 1 if eq else 2  # "--flag=value" or "--flag value"
            continue
        out.append(argv[i])
        i += 1
    vision = bool(mmproj) and wants_mmproj and had_model
    # No model flag at all is the suite's router mode (models loaded on demand): leave it so.
    if had_model:
        out += ["-m", (vision_model or model) if vision else model]
    if vision and "--no-mmproj" not in out:
        out += ["--mmproj", mmproj]
    if had_draft:
        # The same model drafts for itself: the suite's own spelling of the draft flag.
        out += ["--model-draft", model]
    return out


def main() -> None:
    model = os.environ.get("UPSTREAM_MODEL") or str(ROOT / "build/models/gemma-3-270m-q4_k_m.gguf")
    target = os.environ.get("UPSTREAM_TARGET", "llama")
    args = rewrite_args(
        sys.argv[1:], model, os.environ.get("UPSTREAM_MMPROJ") or None, os.environ.get("UPSTREAM_VISION_MODEL") or None
    )
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

    if os.environ.get("UPSTREAM_MMPROJ"):
        _image_mirror()
    _hub()


# The suite's Hugging Face repos that router mode uses, each with the file its tests name by tag:
# the first three are in the cache before the tests (the suite's load_all downloads them), the
# last one its router tests download themselves.
HUB_REPOS = {
    "ggml-org/tinygemma3-GGUF": "tinygemma3-Q8_0.gguf",
    "ggml-org/test-model-stories260K": "stories260K-F32.gguf",
    "ggml-org/test-model-stories260K-infill": "stories260K-infill-F32.gguf",
    "ggml-org/test-model-router-download": "test-model-router-download-F16.gguf",
}
SEEDED = list(HUB_REPOS)[:3]
# the stand-in's preset repo (the suite's test_router_remote_preset names these two models)
REMOTE_PRESET = """[tinygemma3-preset]
hf-repo = ggml-org/tinygemma3-GGUF:Q8_0

[stories260K-test]
hf-repo = ggml-org/test-model-stories260K:F32
"""


def _hub() -> None:
    """Start the Hub stand-in (every repo of ``HUB_REPOS`` holds the local model under the
    suite's file name) and point both servers at it (llama.cpp reads ``MODEL_ENDPOINT``,
    huggingface_hub ``HF_ENDPOINT``); put the ``SEEDED`` repos into the download cache in the
    Hugging Face layout both servers read (refs/main, blobs/SHA256, snapshots/COMMIT/FILE)."""
    import importlib.util

    model = Path(os.environ.get("UPSTREAM_MODEL") or ROOT / "build/models/gemma-3-270m-q4_k_m.gguf")
    spec = importlib.util.spec_from_file_location("hub_standin", ROOT / "tests/hub_standin.py")
    assert spec is not None and spec.loader is not None
    standin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standin)
    cache = Path(os.environ.get("LLAMA_CACHE") or "tmp").resolve()  # the suite's default, in its cwd
    preset = cache.parent / "remote-preset.ini"
    preset.write_text(REMOTE_PRESET)
    repos = {repo: {name: model} for repo, name in HUB_REPOS.items()}
    repos.update({repo: {"preset.ini": preset} for repo in PRESET_HF_REPOS})
    hub = standin.Hub(repos)
    httpd = standin.ThreadingHTTPServer(("127.0.0.1", 0), hub.handler())
    standin.threading.Thread(target=httpd.serve_forever, daemon=True).start()
    hub.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    os.environ["MODEL_ENDPOINT"] = os.environ["HF_ENDPOINT"] = hub.url

    blob = standin._digest(model, "sha256")
    for repo in SEEDED:
        folder = cache / ("models--" + repo.replace("/", "--"))
        (folder / "refs").mkdir(parents=True, exist_ok=True)
        (folder / "refs/main").write_text(standin.COMMIT)
        (folder / "blobs").mkdir(exist_ok=True)
        target = folder / "blobs" / blob
        if not target.exists():
            try:
                os.link(model, target)  # the model's bytes, not a copy
            except OSError:
                target.symlink_to(model)
        snapshot = folder / "snapshots" / standin.COMMIT
        snapshot.mkdir(parents=True, exist_ok=True)
        link = snapshot / HUB_REPOS[repo]
        if not link.is_symlink():
            link.symlink_to(Path("../../blobs") / blob)


# The suite's test images (CIFAR-10 pictures in the tinygemma3 repo). Tests fetch them with
# requests (for base64 payloads) or hand their URL to the server, which downloads it.
HF_TEST_IMAGES = "https://huggingface.co/ggml-org/tinygemma3-GGUF/resolve/main/test/"


def _image_mirror() -> None:
    """Serve the PNGs that upstream_server_tests.sh generated into ``$UPSTREAM_IMAGES`` (random
    pixels, by pyllama_yield.testing.make_test_image) for the suite's test image URLs
    (``HF_TEST_IMAGES`` + name.png, one of them per name) from a local HTTP server in this pytest
    process, and point
    every ``requests`` call at it: the URL of a test-side fetch, and those URLs inside a JSON body
    sent to the server under test (the server then downloads the image from 127.0.0.1, as it
    would from huggingface.co). Other URLs are left alone (offline, they fail as before)."""
    import http.server
    import threading
    import zlib

    import requests

    prefix_path = HF_TEST_IMAGES[len("https://huggingface.co") :]
    images = sorted(Path(os.environ["UPSTREAM_IMAGES"]).glob("*.png"))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            name = self.path[len(prefix_path) :] if self.path.startswith(prefix_path) else ""
            if not name.endswith(".png") or "/" in name:
                self.send_error(404)
                return
            body = images[zlib.crc32(name.encode()) % len(images)].read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    local = f"http://127.0.0.1:{httpd.server_address[1]}{prefix_path}"

    def rewrite(value):
        if isinstance(value, str):
            return local + value[len(HF_TEST_IMAGES) :] if value.startswith(HF_TEST_IMAGES) else value
        if isinstance(value, dict):
            return {k: rewrite(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rewrite(v) for v in value]
        return value

    real_request = requests.sessions.Session.request

    def request(self, method, url, *args, **kwargs):
        if kwargs.get("json") is not None:
            kwargs["json"] = rewrite(kwargs["json"])
        return real_request(self, method, rewrite(url), *args, **kwargs)

    requests.sessions.Session.request = request


if __name__ == "__main__":
    main()
