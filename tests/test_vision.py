"""Images in prompts (``serve --mmproj``), on a tiny Gemma 3 text model with a tiny projector that
``pyllama_yield.testing`` writes: an image is 16 tokens, wrapped in ``<start_of_image>`` ...
``<end_of_image>`` text by mtmd."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("PIL")
from http_server import start_server, stop_server  # noqa: E402

from pyllama_yield.testing import make_test_image, make_tiny_vision_model  # noqa: E402

MARKER = "<__media__>"
IMAGE_TOKENS = 16
CAT, TRUCK = make_test_image(seed=1), make_test_image(32, 24, seed=2, fmt="JPEG")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def data_uri(data: bytes, kind: str = "image/png") -> str:
    return f"data:{kind};base64,{b64(data)}"


def chat(*parts: dict[str, object], text: str = "What is this?") -> dict[str, object]:
    content = [{"type": "text", "text": text}, *parts]
    return {"messages": [{"role": "user", "content": content}], "max_tokens": 4, "temperature": 0}


def image_part(url: str) -> dict[str, object]:
    return {"type": "image_url", "image_url": {"url": url}}


@pytest.fixture(scope="module")
def vision_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    folder = tmp_path_factory.mktemp("vision")
    model, mmproj = make_tiny_vision_model(folder)
    media = folder / "media"
    (media / "pets").mkdir(parents=True)
    (media / "pets" / "cat.png").write_bytes(CAT)
    (folder / "secret.png").write_bytes(CAT)
    return model, mmproj, media


@pytest.fixture(scope="module")
def slot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slots")


@pytest.fixture(scope="module")
def client(vision_files: tuple[Path, Path, Path], slot_dir: Path) -> Iterator[httpx.Client]:
    model, mmproj, media = vision_files
    slots = slot_dir
    import os

    os.environ["LLAMA_MEDIA_MARKER"] = MARKER  # as llama.cpp's own vision tests fix it
    try:
        proc, base = start_server(
            model, "--mmproj", str(mmproj), "--media-path", str(media), "-np", "2", "-c", "2048",
            "--threads", "1", "--slot-save-path", str(slots), "--metrics",
        )  # fmt: skip
    finally:
        del os.environ["LLAMA_MEDIA_MARKER"]
    with httpx.Client(base_url=base, timeout=120) as c:
        yield c
    out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def completion(client: httpx.Client, prompt: object, **extra: object) -> dict[str, object]:
    r = client.post("/completion", json={"prompt": prompt, "n_predict": 4, "temperature": 0, **extra})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_props_and_models_report_vision(client: httpx.Client) -> None:
    props = client.get("/props").json()
    assert props["modalities"] == {"vision": True, "audio": False, "video": False}
    assert props["media_marker"] == MARKER
    assert "multimodal" in client.get("/v1/models").json()["models"][0]["capabilities"]


def test_an_image_in_chat_counts_its_tokens_and_answers(client: httpx.Client) -> None:
    body = chat(image_part(data_uri(CAT)))
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]
    without = client.post("/v1/chat/completions", json=chat()).json()["usage"]
    # the image's 16 cells plus the <start_of_image>/<end_of_image> text mtmd wraps it in
    assert usage["prompt_tokens"] > without["prompt_tokens"] + IMAGE_TOKENS
    counted = client.post("/v1/chat/completions/input_tokens", json=body).json()["input_tokens"]
    assert counted == usage["prompt_tokens"]


def test_an_image_in_a_streamed_chat(client: httpx.Client) -> None:
    body = {**chat(image_part(data_uri(TRUCK, "image/jpeg"))), "stream": True}
    events = []
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    assert sum(bool(e["choices"] and e["choices"][0]["delta"].get("content")) for e in events) >= 1


def test_images_through_the_anthropic_and_responses_routes(client: httpx.Client) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(CAT)}}
    body = {"model": "x", "max_tokens": 2, "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}
    plain = client.post("/v1/messages", json=body)
    body["messages"][0]["content"].append(image)  # type: ignore[index]
    r = client.post("/v1/messages", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["input_tokens"] > plain.json()["usage"]["input_tokens"] + IMAGE_TOKENS
    parts = [{"type": "input_text", "text": "Hi"}, {"type": "input_image", "image_url": data_uri(CAT)}]
    item = {"role": "user", "content": parts}
    r = client.post("/v1/responses", json={"model": "x", "max_output_tokens": 2, "input": [item]})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["input_tokens"] > plain.json()["usage"]["input_tokens"] + IMAGE_TOKENS


def test_multimodal_data_and_the_prompt_cache(client: httpx.Client) -> None:
    prompt = {"prompt_string": f"Look: {MARKER} now", "multimodal_data": [b64(CAT)]}
    first = completion(client, prompt, id_slot=1)
    n = first["tokens_evaluated"]
    again = completion(client, prompt, id_slot=1)
    assert again["content"] == first["content"]
    assert again["timings"]["cache_n"] == n - 1 and again["timings"]["prompt_n"] == 1
    other = completion(client, {**prompt, "multimodal_data": [b64(TRUCK)]}, id_slot=1)
    # the same text before the image is kept; the image differs, so it and what follows are not
    assert 0 < other["timings"]["cache_n"] < n - IMAGE_TOKENS
    assert other["timings"]["prompt_n"] == n - other["timings"]["cache_n"]


def test_two_images_in_one_prompt(client: httpx.Client) -> None:
    prompt = {"prompt_string": f"A: {MARKER} B: {MARKER}\n", "multimodal_data": [b64(CAT), b64(TRUCK)]}
    one = {"prompt_string": f"A: {MARKER}\n", "multimodal_data": [b64(CAT)]}
    assert completion(client, prompt)["tokens_evaluated"] > completion(client, one)["tokens_evaluated"] + IMAGE_TOKENS


def test_slot_save_and_restore_keep_an_image(client: httpx.Client) -> None:
    prompt = {"prompt_string": f"Saved: {MARKER} here", "multimodal_data": [b64(CAT)]}
    first = completion(client, prompt, id_slot=1)
    saved = client.post("/slots/1?action=save", json={"filename": "img.bin"}).json()
    assert saved["n_saved"] == first["tokens_evaluated"] + 3  # its prompt and the 4 tokens but the last
    assert client.post("/slots/0?action=restore", json={"filename": "img.bin"}).json()["n_restored"] == saved["n_saved"]
    again = completion(client, prompt, id_slot=0)
    assert again["content"] == first["content"]
    assert again["timings"]["prompt_n"] == 1  # the image came back with the slot's cache


def test_file_urls_only_inside_media_path(client: httpx.Client) -> None:
    r = client.post("/v1/chat/completions", json=chat(image_part("file://pets/cat.png")))
    assert r.status_code == 200, r.text
    r2 = client.post("/v1/chat/completions", json=chat(image_part("file:////pets//cat.png")))
    assert r2.status_code == 200, r2.text
    for url, why in [
        ("file://../secret.png", "file path is not allowed"),
        ("file://pets/../../secret.png", "file path is not allowed"),
        ("file://pets/dog.png", "file does not exist or cannot be opened"),
    ]:
        r = client.post("/v1/chat/completions", json=chat(image_part(url)))
        assert r.status_code == 400 and why in r.json()["error"]["message"], (url, r.text)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("malformed", "Invalid base64 value"),
        (b64(b"plain text, not an image"), "Failed to load image or audio file"),
        (data_uri(CAT[: len(CAT) // 3]), "Failed to load image or audio file"),  # truncated
        ("data:text/html;base64,aGVsbG8=", "Invalid uri format"),
        ("data:image/png,aGVsbG8=", "uri must be base64 encoded"),
    ],
)
def test_bad_media_is_a_400_with_the_cause(client: httpx.Client, url: str, why: str) -> None:
    r = client.post("/v1/chat/completions", json=chat(image_part(url)))
    assert r.status_code == 400 and why in r.json()["error"]["message"], r.text


@pytest.fixture(scope="module")
def image_host() -> Iterator[str]:
    """A local web server with /cat.png (remote media without the internet)."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path != "/cat.png":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(CAT)))
            self.end_headers()
            self.wfile.write(CAT)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_remote_images_are_fetched(client: httpx.Client, image_host: str) -> None:
    r = client.post("/v1/chat/completions", json=chat(image_part(f"{image_host}/cat.png")))
    assert r.status_code == 200, r.text
    local = client.post("/v1/chat/completions", json=chat(image_part(data_uri(CAT)))).json()
    assert r.json()["usage"]["prompt_tokens"] == local["usage"]["prompt_tokens"]
    r = client.post("/v1/chat/completions", json=chat(image_part(f"{image_host}/dog.png")))
    assert r.status_code == 400 and "Failed to download image" in r.text


def test_markers_and_files_must_pair_up(client: httpx.Client) -> None:
    for prompt in (
        {"prompt_string": f"{MARKER} and {MARKER} end", "multimodal_data": [b64(CAT)]},
        {"prompt_string": "no marker here", "multimodal_data": [b64(CAT)]},
    ):
        r = client.post("/completion", json={"prompt": prompt, "n_predict": 2})
        assert r.status_code == 400 and "Failed to tokenize prompt" in r.json()["error"]["message"], r.text
    assert client.get("/health").status_code == 200  # and the server goes on


def test_a_slot_file_with_an_image_needs_a_projector(
    client: httpx.Client, vision_files: tuple[Path, Path, Path], slot_dir: Path
) -> None:
    prompt = {"prompt_string": f"Kept: {MARKER} here", "multimodal_data": [b64(CAT)]}
    completion(client, prompt, id_slot=1)
    assert client.post("/slots/1?action=save", json={"filename": "media.bin"}).status_code == 200
    proc, base = start_server(
        vision_files[0], "-np", "2", "-c", "2048", "--threads", "1", "--slot-save-path", str(slot_dir)
    )
    try:  # a file of another cache layout (here 4 slots in one stream) is the client's error too
        other, url = start_server(vision_files[0], "--threads", "1", "--slot-save-path", str(slot_dir))
        r = httpx.post(f"{url}/slots/0?action=restore", json={"filename": "media.bin"}, timeout=60)
        assert r.status_code == 400 and "Unable to restore slot" in r.text, r.text
    finally:
        stop_server(other)
    try:
        r = httpx.post(f"{base}/slots/0?action=restore", json={"filename": "media.bin"}, timeout=60)
        assert r.status_code == 400 and "Cannot restore media tokens without an mmproj" in r.text, r.text
        r = httpx.post(f"{base}/completion", json={"prompt": "Kept: here", "n_predict": 2, "id_slot": 0}, timeout=60)
        assert r.status_code == 200 and r.json()["timings"]["cache_n"] == 0  # the slot stays usable, empty
    finally:
        stop_server(proc)


def test_without_a_projector_media_is_refused(tiny_model_path: Path) -> None:
    proc, base = start_server(tiny_model_path, "--threads", "1")
    try:
        r = httpx.post(f"{base}/v1/chat/completions", json=chat(image_part(data_uri(CAT))), timeout=60)
        assert r.status_code == 500 and "image input is not supported" in r.json()["error"]["message"]
        prompt = {"prompt_string": f"x {MARKER}", "multimodal_data": [b64(CAT)]}
        r = httpx.post(f"{base}/completion", json={"prompt": prompt}, timeout=60)
        assert r.status_code == 400 and "does not support multimodal" in r.json()["error"]["message"]
    finally:
        stop_server(proc)


def test_the_llama_api_takes_images(vision_files: tuple[Path, Path, Path]) -> None:
    from pyllama_yield import Llama

    model, mmproj, media = vision_files
    with Llama(model, mmproj=mmproj, n_ctx=512, n_threads=1) as llm:
        text = [{"role": "user", "content": "What is this?"}]
        base = llm.create_chat_completion(text, max_tokens=2)["usage"]["prompt_tokens"]
        for url in (data_uri(CAT), f"file://{media / 'pets' / 'cat.png'}"):
            for part in ({"type": "image_url", "image_url": {"url": url}}, {"type": "image_url", "image_url": url}):
                msgs = [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, part]}]
                got = llm.create_chat_completion(msgs, max_tokens=2)
                assert got["usage"]["prompt_tokens"] > base + IMAGE_TOKENS
                chunks = list(llm.create_chat_completion(msgs, max_tokens=2, stream=True))
                assert chunks[-1]["choices"][0]["finish_reason"] == "length"
        bad = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_uri(b"no image")}}]}]
        with pytest.raises(ValueError, match="Failed to load image or audio file"):
            llm.create_chat_completion(bad, max_tokens=2)


def close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-5


def test_embeddings_of_prompts_with_images(vision_files: tuple[Path, Path, Path]) -> None:
    model, mmproj, _ = vision_files
    flags = ["--mmproj", str(mmproj), "--embeddings", "--pooling", "mean", "--threads", "1"]
    import os

    os.environ["LLAMA_MEDIA_MARKER"] = MARKER
    try:
        proc, base = start_server(model, *flags)
    finally:
        del os.environ["LLAMA_MEDIA_MARKER"]
    try:
        with_cat = {"prompt_string": f"What is this: {MARKER}\n", "multimodal_data": [b64(CAT)]}
        with_truck = {**with_cat, "multimodal_data": [b64(TRUCK)]}
        r = httpx.post(f"{base}/embeddings", json={"content": [with_cat, with_cat, with_truck, "What is this:\n"]})
        assert r.status_code == 200, r.text
        e = [item["embedding"][0] for item in r.json()]
        # batch shapes move the last digits (llama-server's vectors differ by 1e-9 too)
        assert close(e[0], e[1]) and not close(e[0], e[2]) and not close(e[0], e[3])  # the same image, another, none
        parts = {"content": [{"type": "text", "text": "What is this: "}, image_part(data_uri(CAT)),
                             {"type": "text", "text": "\n"}]}  # fmt: skip
        r = httpx.post(f"{base}/v1/embeddings", json={"input": [parts, with_cat, "What is this: \n"]})
        assert r.status_code == 200, r.text
        data = [d["embedding"] for d in r.json()["data"]]
        assert close(data[0], data[1]) and close(data[0], e[0]) and not close(data[0], data[2])  # parts = media prompt
        assert r.json()["usage"]["prompt_tokens"] > 3 * IMAGE_TOKENS // 2
        bad = httpx.post(f"{base}/embeddings", json={"content": [{**with_cat, "multimodal_data": ["malformed"]}]})
        assert bad.status_code == 400 and "Invalid base64 value" in bad.text
    finally:
        stop_server(proc)
