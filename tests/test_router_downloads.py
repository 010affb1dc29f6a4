"""The router's downloads, with llama-server's contract (its ``test_router.py`` download cases):
``POST /models`` fetches a model into the cache in the background while ``/models/sse`` streams
the progress, ``DELETE /models`` stops the model or cancels its download and removes its files.
Against the Hub stand-in (``hub_standin.py``); nothing reaches the internet."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_server import start_serve, stop_server
from hub_standin import running_hub

from pyllama_yield import hub as hf
from pyllama_yield.router.downloads import Downloads
from pyllama_yield.router.registry import ModelRouter
from pyllama_yield.router.sources import hf_cache_models

TINY = "org/tiny-GGUF:Q8_0"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return tmp_path / "cache"


class Events:
    """``GET /models/sse`` read by a thread; :meth:`wait` for one event (bounded)."""

    def __init__(self, base: str) -> None:
        self.seen: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._open = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(base,), daemon=True)
        self._thread.start()
        assert self._open.wait(10), "the event stream did not open"

    def _read(self, base: str) -> None:
        try:
            with httpx.stream("GET", f"{base}/models/sse", timeout=60) as r:
                self._open.set()
                for line in r.iter_lines():
                    if self._stop.is_set():
                        return
                    if line.startswith("data: "):
                        with self._changed:
                            self.seen.append(json.loads(line[6:]))
                            self._changed.notify_all()
        except httpx.HTTPError:
            pass  # the router stopped: the stream ends

    def wait(self, event: str, model: str, timeout: float = 30) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next((e for e in self.seen if e["event"] == event and e["model"] == model), None)

        with self._changed:
            assert self._changed.wait_for(found, timeout), f"no {event} for {model}: {self.seen}"
            return found()  # type: ignore[return-value]

    def close(self) -> None:
        self._stop.set()


@contextmanager
def router(cache: Path, *args: str) -> Iterator[httpx.Client]:
    proc, base = start_serve(["--offline", "-c", "256", "-np", "1", "-t", "1", *args], cache.parent)
    try:
        with httpx.Client(base_url=base, timeout=60) as c:
            yield c
    finally:
        stop_server(proc)


def test_post_models_downloads_in_the_background_and_delete_removes(tiny_model_path, cache, tmp_path, monkeypatch):
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "local.gguf").symlink_to(tiny_model_path)
    repos = {"org/tiny-GGUF": {"tiny-Q8_0.gguf": tiny_model_path, "tiny-Q4_K_M.gguf": tiny_model_path}}
    with running_hub(repos) as standin:
        monkeypatch.setenv("HF_ENDPOINT", standin.url)
        # --offline: the router finds models in the cache only; an explicit download still happens
        # (llama-server's router downloads on POST /models whatever its --offline)
        with router(cache, "--models-dir", str(folder), "--models-max", "1") as c:
            events = Events(str(c.base_url))
            assert c.post("/models", json={"model": TINY}).json() == {"success": True}
            events.wait("download_finished", TINY)
            progress = [e for e in events.seen if e["event"] == "download_progress"]
            size = tiny_model_path.stat().st_size
            assert progress[-1]["data"]["progress"]["org/tiny-GGUF/tiny-Q8_0.gguf"] == {"done": size, "total": size}
            listed = {m["id"]: m for m in c.get("/models").json()["data"]}
            assert listed[TINY]["source"] == "cache" and listed[TINY]["status"]["value"] == "unloaded"
            assert standin.downloads("tiny-Q8_0.gguf") == 1 and standin.downloads("tiny-Q4_K_M.gguf") == 0

            r = c.post("/completion", json={"model": TINY, "prompt": "Hi", "n_predict": 2})
            assert r.status_code == 200
            statuses = [e["data"]["status"] for e in events.seen if e["event"] == "status_change"]
            assert statuses == ["downloading", "loading", "loaded"]

            for body, message in [
                ({"model": TINY}, f"model '{TINY}' already exists"),
                ({"model": "org/missing-GGUF"}, "unable to download: org/missing-GGUF: no such model repository"),
                ({"model": "org/tiny-GGUF:Q2_K"}, "no GGUF file for quant Q2_K"),
                ({}, "model must be a non-empty string"),
            ]:
                r = c.post("/models", json=body)
                assert r.status_code == 400 and message in r.json()["error"]["message"], r.text

            # the model is running: DELETE stops it, then its files leave the cache (that quant only)
            assert c.delete("/models", params={"model": TINY}).json() == {"success": True}
            events.wait("model_remove", TINY)
            assert any(e["event"] == "status_change" and e["data"]["status"] == "unloaded" for e in events.seen)
            assert TINY not in {m["id"] for m in c.get("/models").json()["data"]}
            assert not list(cache.glob("models--org--tiny-GGUF/snapshots/*/*Q8_0.gguf"))

            r = c.delete("/models", params={"model": TINY})
            assert r.status_code == 500 and r.json()["error"]["message"] == f"model name={TINY} is not found"
            r = c.delete("/models", params={"model": "local"})
            assert r.status_code == 500
            assert r.json()["error"]["message"] == "model name=local is not removable (not from cache)"
            events.close()


def test_delete_cancels_a_download_in_progress(cache, tmp_path, monkeypatch):
    big = tmp_path / "big-Q8_0.gguf"
    big.write_bytes(bytes(12 << 20))  # more than one of huggingface_hub's 10 MiB chunks
    go_on = threading.Event()
    with running_hub({"org/big-GGUF": {"big-Q8_0.gguf": big}}) as standin:
        monkeypatch.setenv("HF_ENDPOINT", standin.url)
        standin.hold = (11 << 20, go_on)  # one chunk arrives, then the Hub waits

        async def scenario() -> list[dict[str, Any]]:
            models = ModelRouter(hf_cache_models, [], 1, True)
            seen = models.events.subscribe()
            downloads = Downloads(models, None)
            await downloads.start("org/big-GGUF:Q8_0")
            while (await asyncio.wait_for(seen.get(), 30))["event"] != "download_progress":
                pass
            download = downloads.active["org/big-GGUF:Q8_0"]
            removing = asyncio.ensure_future(downloads.remove("org/big-GGUF:Q8_0"))
            for _ in range(1000):
                if download.cancel.is_set():
                    break
                await asyncio.sleep(0.01)
            assert download.cancel.is_set()
            go_on.set()  # the next chunk arrives and the download stops there
            await asyncio.wait_for(removing, 30)
            assert "org/big-GGUF:Q8_0" not in downloads.active and "org/big-GGUF:Q8_0" not in models.instances
            return [seen.get_nowait() for _ in range(seen.qsize())]

        later = asyncio.run(scenario())
        assert [e["event"] for e in later if e["event"] != "models_reload"] == ["download_failed", "model_remove"]
        assert not [p for p in cache.rglob("*") if p.is_file() and p.stat().st_size == big.stat().st_size]


def test_remove_cached_takes_one_quant_and_the_repo_with_its_last(tiny_model_path, cache, monkeypatch):
    repos = {
        "org/tiny-GGUF": {"tiny-Q8_0.gguf": tiny_model_path, "tiny-Q4_K_M.gguf": tiny_model_path},
        "org/other-GGUF": {"other-Q8_0.gguf": tiny_model_path},  # the stand-in's one commit hash, as tiny's
    }
    with running_hub(repos) as standin:
        monkeypatch.setenv("HF_ENDPOINT", standin.url)
        hf.download("org/tiny-GGUF:Q8_0")
        hf.download("org/tiny-GGUF:Q4_K_M")  # the same bytes: one blob for both files
        hf.download("org/other-GGUF:Q8_0")
    assert hf.remove_cached("org/tiny-GGUF:Q8_0")
    left = hf_cache_models()
    assert list(left) == ["org/other-GGUF:Q8_0", "org/tiny-GGUF:Q4_K_M"]
    assert Path(left["org/tiny-GGUF:Q4_K_M"].flags["--model"]).is_file()
    assert hf.remove_cached("org/tiny-GGUF:Q4_K_M")
    assert list(hf_cache_models()) == ["org/other-GGUF:Q8_0"] and not (cache / "models--org--tiny-GGUF").exists()
    assert not hf.remove_cached("org/tiny-GGUF:Q4_K_M")


def test_dedup_cache_models_hides_what_a_preset_downloads_and_hfd_fetches_the_draft(
    tiny_model_path, cache, tmp_path, monkeypatch
):
    from pyllama_yield.cli import settings_from_hub
    from pyllama_yield.router.sources import collect
    from pyllama_yield.settings import ServerSettings

    repos = {
        "org/tiny-GGUF": {"tiny-Q8_0.gguf": tiny_model_path, "tiny-Q4_K_M.gguf": tiny_model_path},
        "org/draft-GGUF": {"draft-Q8_0.gguf": tiny_model_path},
    }
    with running_hub(repos) as standin:
        monkeypatch.setenv("HF_ENDPOINT", standin.url)
        hf.download("org/tiny-GGUF:Q4_K_M")
        # -hf and -hfd (llama.cpp's --spec-draft-hf): the model and its draft come from the Hub
        got = settings_from_hub(ServerSettings(hf_repo="org/tiny-GGUF:Q8_0", hf_repo_draft="org/draft-GGUF"))
    assert got.model.endswith("tiny-Q8_0.gguf") and got.model_draft.endswith("draft-Q8_0.gguf")

    preset = tmp_path / "models.ini"
    section = "[model-dedup]\nhf-repo = org/tiny-GGUF:Q8_0\nspec-draft-hf = org/draft-GGUF\n"

    def listed(text: str) -> list[str]:
        preset.write_text(text)
        return [m.id for m in collect(ServerSettings(models_preset=str(preset))).values() if not m.hidden]

    everything = ["model-dedup", "org/draft-GGUF:Q8_0", "org/tiny-GGUF:Q4_K_M", "org/tiny-GGUF:Q8_0"]
    assert listed(section) == everything
    # the preset's model and its draft leave the listing; the repo's other quant stays
    assert listed(section + "dedup-cache-models = 1\n") == ["model-dedup", "org/tiny-GGUF:Q4_K_M"]
    assert listed("[*]\ndedup-cache-models = 1\n\n" + section) == ["model-dedup", "org/tiny-GGUF:Q4_K_M"]
    assert listed("[*]\ndedup-cache-models = 1\n\n" + section + "dedup-cache-models = 0\n") == everything


def test_event_streams_end_when_the_router_stops(cache):
    proc, base = start_serve(["--offline", "-c", "256"], cache.parent)
    events = Events(base)
    out = stop_server(proc)
    events._thread.join(30)
    assert not events._thread.is_alive(), "the event stream outlived the router"
    assert "graceful shutdown exceeded" not in out, out[-2000:]  # nothing held the router open


def test_post_models_with_the_hub_unreachable_is_503_naming_the_cause(cache, monkeypatch):
    # a host name that never resolves (RFC 6761): the Hub cannot be reached, the model may exist
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.invalid")
    with router(cache) as c:
        r = c.post("/models", json={"model": TINY})
        assert r.status_code == 503, r.text
        error = r.json()["error"]
        assert error["type"] == "unavailable_error"
        assert "cannot reach the Hugging Face Hub (http://hub.invalid)" in error["message"]
        assert "--offline" in error["message"]
