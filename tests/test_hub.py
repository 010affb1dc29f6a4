"""Downloads from the Hugging Face Hub (``-hf``, ``Llama.from_pretrained``, the router's cache
source) against a stand-in for the Hub inside the test (``hub_standin.py``): the files come from
it once, a second start finds them in the cache, ``--offline`` never asks the Hub."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from http_server import REPO, start_serve, stop_server
from hub_standin import running_hub

from pyllama_yield.hub import HubError, _pick, file_tag


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, tiny_model_path: Path):
    from pyllama_yield.testing import make_tiny_model, make_tiny_vision_model

    files = tmp_path_factory.mktemp("hubfiles")
    vision, mmproj = make_tiny_vision_model(files)
    make_tiny_model(files / "split-Q8_0.gguf", split_max_tensors=10)  # three shards
    (files / "preset.ini").write_text("[tiny-preset]\nhf-repo = org/tiny-GGUF:Q8_0\nalias = tp\n")
    repos = {
        "org/presets": {"preset.ini": files / "preset.ini", "README.md": files / "preset.ini"},
        "org/split-GGUF": {f.name: f for f in files.glob("split-Q8_0-*.gguf")},
        "org/tiny-GGUF": {"tiny-Q8_0.gguf": tiny_model_path, "tiny-Q4_K_M.gguf": tiny_model_path},
        "org/vision-GGUF": {"vision-Q8_0.gguf": vision, "mmproj-vision-f16.gguf": mmproj},
    }
    with running_hub(repos) as hub:
        yield hub


@pytest.fixture
def cache(hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh download cache, and the Hub stand-in as the endpoint."""
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    hub.requests.clear()
    return tmp_path / "cache"


def serve_hf(cache: Path, *args: str) -> tuple[object, httpx.Client]:
    proc, base = start_serve([*args, "-c", "256", "-np", "1", "-t", "1"], cache.parent)
    return proc, httpx.Client(base_url=base, timeout=60)


def test_serve_hf_downloads_once_then_the_cache_serves_even_offline(hub, cache):
    proc, c = serve_hf(cache, "-hf", "org/tiny-GGUF:q8_0")  # the quant in any case, as llama.cpp
    with c:
        assert c.get("/props").json()["model_path"].endswith("tiny-Q8_0.gguf")
        assert c.post("/completion", json={"prompt": "Hi", "n_predict": 2}).status_code == 200
    stop_server(proc)  # type: ignore[arg-type]
    assert hub.downloads("tiny-Q8_0.gguf") == 1 and hub.downloads("tiny-Q4_K_M.gguf") == 0
    proc, c = serve_hf(cache, "-hf", "org/tiny-GGUF:Q8_0")
    c.close()
    stop_server(proc)  # type: ignore[arg-type]
    assert hub.downloads("tiny-Q8_0.gguf") == 1  # the second start found it in the cache
    asked = len(hub.requests)
    proc, c = serve_hf(cache, "-hf", "org/tiny-GGUF:Q8_0", "--offline")
    c.close()
    stop_server(proc)  # type: ignore[arg-type]
    assert len(hub.requests) == asked  # offline: not one request
    with pytest.raises(RuntimeError, match="org/vision-GGUF: not in the cache, and --offline forbids a download"):
        serve_hf(cache, "-hf", "org/vision-GGUF", "--offline")


def test_the_default_quant_and_the_repos_projector(hub, cache):
    proc, c = serve_hf(cache, "-hf", "org/vision-GGUF")  # no Q4_K_M here: Q8_0, with its mmproj
    with c:
        props = c.get("/props").json()
        assert props["model_path"].endswith("vision-Q8_0.gguf") and props["modalities"]["vision"] is True
    stop_server(proc)  # type: ignore[arg-type]
    proc, c = serve_hf(cache, "-hf", "org/tiny-GGUF")
    with c:
        assert c.get("/props").json()["model_path"].endswith("tiny-Q4_K_M.gguf")
    stop_server(proc)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match=r"no GGUF file for quant Q2_K \(quants here: Q4_K_M, Q8_0\)"):
        serve_hf(cache, "-hf", "org/tiny-GGUF:Q2_K")


def test_a_split_model_comes_with_all_its_shards_and_is_listed_once(hub, cache):
    from pyllama_yield.router.sources import hf_cache_models

    proc, c = serve_hf(cache, "-hf", "org/split-GGUF:Q8_0")
    with c:
        assert c.get("/props").json()["model_path"].endswith("split-Q8_0-00001-of-00003.gguf")
        assert c.post("/completion", json={"prompt": "Hi", "n_predict": 2}).json()["tokens_predicted"] == 2
    stop_server(proc)  # type: ignore[arg-type]
    assert [hub.downloads(f"split-Q8_0-0000{i}-of-00003.gguf") for i in (1, 2, 3)] == [1, 1, 1]
    listed = hf_cache_models(str(cache))
    assert list(listed) == ["org/split-GGUF:Q8_0"]
    assert listed["org/split-GGUF:Q8_0"].flags["--model"].endswith("split-Q8_0-00001-of-00003.gguf")


def test_hf_of_a_repo_with_a_preset_runs_the_router_on_it(hub, cache):
    proc, c = serve_hf(cache, "-hf", "org/presets")  # llama.cpp's remote preset
    with c:
        assert c.get("/props").json()["role"] == "router"
        assert [m["id"] for m in c.get("/models").json()["data"]] == ["tiny-preset"]
        r = c.post("/completion", json={"model": "tp", "prompt": "Hi", "n_predict": 2})  # its model from the Hub
        assert r.json()["tokens_predicted"] == 2
    out = stop_server(proc)  # type: ignore[arg-type]
    assert "NOTE: using preset.ini from HF repo 'org/presets'" in out
    assert hub.downloads("preset.ini") == 1 and hub.downloads("tiny-Q8_0.gguf") == 1
    asked = len(hub.requests)
    proc, c = serve_hf(cache, "-hf", "org/presets", "--offline")  # the cached preset, not one request
    with c:
        assert "tiny-preset" in [m["id"] for m in c.get("/models").json()["data"]]
    stop_server(proc)  # type: ignore[arg-type]
    assert len(hub.requests) == asked


def test_file_choice_rules():
    files = ["a/m-Q8_0.gguf", "m-F16-00001-of-00002.gguf", "m-F16-00002-of-00002.gguf", "mmproj-m-f16.gguf", "x.txt"]
    assert _pick("r", files, None, None) == ["a/m-Q8_0.gguf"]
    assert _pick("r", files, "f16", None) == ["m-F16-00001-of-00002.gguf", "m-F16-00002-of-00002.gguf"]
    assert _pick("r", files, None, "m-F16-00002-of-00002.gguf") == files[1:3]  # a shard brings its siblings
    assert _pick("r", ["plain.gguf"], None, None) == ["plain.gguf"]  # no tag: the first GGUF
    with pytest.raises(HubError, match="no file 'nope.gguf'"):
        _pick("r", files, None, "nope.gguf")
    assert (file_tag("stories-f32.gguf"), file_tag("m-Q4_K_M-00002-of-00003.gguf"), file_tag("plain.gguf")) == (
        "F32",
        None,
        None,
    )


def test_from_pretrained_takes_the_one_file_its_glob_matches(hub, cache):
    from pyllama_yield import Llama

    with Llama.from_pretrained("org/tiny-GGUF", "*Q8_0.gguf", n_ctx=256) as llm:
        assert llm.model_path.endswith("tiny-Q8_0.gguf") and Path(llm.model_path).is_relative_to(cache)
        assert llm("Hello", max_tokens=2)["usage"]["completion_tokens"] == 2
    with pytest.raises(HubError, match=r"2 files \(tiny-Q4_K_M.gguf, tiny-Q8_0.gguf\) match '\*.gguf'"):
        Llama.from_pretrained("org/tiny-GGUF", "*.gguf")
    with pytest.raises(HubError, match="org/missing: no such model repository"):
        Llama.from_pretrained("org/missing", "*.gguf")


def test_the_router_lists_and_serves_what_the_cache_holds(hub, cache):
    from pyllama_yield import Llama

    Llama.from_pretrained("org/tiny-GGUF", "*Q8_0.gguf", n_ctx=256).close()  # into the cache
    proc, c = serve_hf(cache, "--offline")  # no model, the cache's: router mode
    with c:
        listed = {m["id"]: m for m in c.get("/models").json()["data"]}
        assert listed["org/tiny-GGUF:Q8_0"]["source"] == "cache" and listed["org/tiny-GGUF:Q8_0"]["can_remove"]
        r = c.post("/completion", json={"model": "org/tiny-GGUF:Q8_0", "prompt": "Hi", "n_predict": 2})
        assert r.status_code == 200
    stop_server(proc)  # type: ignore[arg-type]


def test_ollama_pull_and_delete_through_the_router(hub, cache):
    ollama = pytest.importorskip("ollama")
    proc, c = serve_hf(cache, "--models-max", "2")  # router mode, the cache empty
    with c:
        client = ollama.Client(host=str(c.base_url))
        assert client.list().models == []
        statuses = [p.status for p in client.pull("hf.co/org/tiny-GGUF:Q8_0", stream=True)]
        assert statuses[0] == "pulling manifest" and statuses[-1] == "success" and "pulling tiny-Q8_0.gguf" in statuses
        assert [m.model for m in client.list().models] == ["org/tiny-GGUF:Q8_0"]
        r = client.chat(
            model="org/tiny-GGUF:Q8_0", messages=[{"role": "user", "content": "hi"}], options={"num_predict": 2}
        )
        assert r.eval_count == 2
        with pytest.raises(ollama.ResponseError, match="only Hugging Face models"):
            client.pull("llama3")
        assert client.delete("org/tiny-GGUF:Q8_0").status == "success"
        assert client.list().models == [] and not list(cache.glob("models--org--tiny-GGUF/snapshots/*/*.gguf"))
    stop_server(proc)  # type: ignore[arg-type]


def test_serve_hf_without_a_network_ends_with_one_line_naming_the_cause(tmp_path: Path):
    # the Hub's host name does not resolve (RFC 6761's .invalid): no five retries, no traceback
    env = {**os.environ, "HF_ENDPOINT": "http://hub.invalid", "LLAMA_CACHE": str(tmp_path), "PYTHONPATH": str(REPO)}
    env.pop("HF_HUB_OFFLINE", None)
    run = subprocess.run(
        [sys.executable, "-m", "pyllama_yield", "serve", "-hf", "org/tiny-GGUF", "--port", "0"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("error: ") and "cannot reach the Hugging Face Hub (http://hub.invalid)" in lines[0]
    assert "--offline" in lines[0]


def test_a_request_that_gets_no_answer_is_hub_unreachable(monkeypatch: pytest.MonkeyPatch):
    # past name resolution (a refused connection, a proxy): huggingface_hub's transport error,
    # whichever httpx it uses, becomes HubUnreachable instead of escaping as itself
    import huggingface_hub

    from pyllama_yield import hub as hf

    transport = hf._transport_errors()[-1]
    monkeypatch.setattr(hf, "_check_resolvable", lambda repo: None)

    def refuse(*args: object, **kwargs: object) -> list[str]:
        raise transport("connection refused")

    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", refuse)
    with pytest.raises(hf.HubUnreachable, match=r"org/tiny-GGUF: cannot reach the Hugging Face Hub .*refused"):
        hf.plan("org/tiny-GGUF")
