"""The chat page at ``/``, in a real browser: Playwright driving Debian's Chromium (headless) against
a served tiny model. A tier of its own, so that the default suite needs no browser: ``apt-get
install chromium`` (Playwright's own download is not used), then ``pytest -m browser``."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_server import API_KEY, start_serve, start_server, stop_server

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("PYLLAMA_CHROMIUM", "/usr/bin/chromium")
TIMEOUT_MS = 30_000
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "webui"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), f"the browser tests need Chromium at {CHROMIUM}: apt-get install chromium"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def served(tiny_model_path: Path) -> Iterator[str]:
    # EOS ignored and the context shifted: an answer without max_tokens runs until it is stopped
    flags = ("-np", "2", "-c", "4096", "--ignore-eos", "--context-shift", "--metrics", "--threads", "1")
    proc, base = start_server(tiny_model_path, *flags)
    yield base
    out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def open_page(browser: Any, url: str) -> tuple[Any, Any]:
    """A fresh browser context (its own localStorage) on ``url``; ``page.errors`` gathers console
    errors and uncaught exceptions."""
    context = browser.new_context()
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    pg.errors = []
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.goto(url)
    return context, pg


@pytest.fixture
def page(browser: Any, served: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    context, pg = open_page(browser, served)
    yield pg
    screenshot(pg, request.node.name)
    context.close()


def screenshot(page: Any, name: str) -> None:
    """The page as the test left it, kept as an artifact (test-artifacts/webui/, not committed)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def set_settings(page: Any, **values: Any) -> None:
    page.click("#open-settings")
    for name, value in values.items():
        page.fill(f"#settings [name={name}]", str(value))
    page.click("#save-settings")
    # the page stores them on the dialog's close event, a task of its own: a message sent before it
    # ran (a busy machine) would go with the old settings, say without max_tokens
    stored = {name: str(value) for name, value in values.items()}
    page.wait_for_function(
        "want => { const s = JSON.parse(localStorage.getItem('pyllama.settings') || '{}');"
        " return Object.entries(want).every(([k, v]) => String(s[k]) === v); }",
        arg=stored,
    )


def send(page: Any, text: str) -> None:
    page.fill("#input", text)
    page.press("#input", "Enter")


def wait_idle(base: str, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        slots = httpx.get(f"{base}/slots", headers=headers, timeout=10).json()
        if not any(s["is_processing"] for s in slots):
            return slots
        time.sleep(0.1)  # polling a server's state: no event to wait on from outside
    raise AssertionError(f"slots still busy: {slots}")


def test_the_page_loads_with_the_model_and_no_console_errors(page: Any) -> None:
    page.wait_for_function("document.querySelector('#model-name').textContent.endsWith('.gguf')")
    assert "context" in page.text_content("#model-ctx")
    page.wait_for_selector("#queue:not([hidden])")
    assert page.errors == []


def test_a_message_streams_into_an_answer_and_reload_keeps_the_conversation(page: Any, served: str) -> None:
    set_settings(page, max_tokens=12, temperature=0)
    send(page, "Hello there")
    page.wait_for_selector(".message.assistant .speed")  # done: tokens/s from the final timings
    assert page.text_content(".message.user .content") == "Hello there"
    answer = page.text_content(".message.assistant .content")
    assert "12 tokens" in page.text_content(".message.assistant .speed")
    page.reload()
    page.wait_for_selector(".message.assistant")
    assert page.text_content(".message.assistant .content") == answer  # kept in localStorage
    assert page.text_content("#conversations li.active span") == "Hello there"
    page.click("#open-settings")
    assert page.input_value("#settings [name=max_tokens]") == "12"  # settings persist
    page.keyboard.press("Escape")
    page.click(".message.assistant button:text('regenerate')")
    page.wait_for_selector(".message.assistant .speed")
    assert page.locator(".message.assistant").count() == 1
    assert page.errors == []


def test_stop_ends_the_answer_leaves_every_slot_idle_and_the_queue_refreshes_meanwhile(page: Any, served: str) -> None:
    set_settings(page, max_tokens=-1)
    send(page, "Tell me everything")
    page.wait_for_selector("#stop:not([hidden])")
    page.wait_for_function("(document.querySelector('.message.assistant .content')?.textContent.length ?? 0) > 20")
    # while the model decodes, the panel keeps refreshing and shows the slot generating
    page.wait_for_selector("#slots tr.generating")
    before = int(page.get_attribute("#queue-updated", "data-refreshes"))
    page.wait_for_function(f"Number(document.querySelector('#queue-updated').dataset.refreshes) >= {before + 2}")
    assert page.is_visible("#stop")  # still generating after two refreshes
    page.click("#stop")
    page.wait_for_selector("#send:not([hidden])")
    assert "stopped" in page.text_content(".message.assistant .meta")
    assert all(s["state"] == "idle" for s in wait_idle(served))
    assert page.errors == []


def test_model_output_is_sanitised_markdown_with_highlighted_code(page: Any) -> None:
    hostile = (
        '**bold** <img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> '
        "[link](javascript:window.__pwned=3)\n\n```python\nprint('hi')\n```\n"
    )
    conv = {
        "id": "c1",
        "name": "hostile",
        "created": 0,
        "messages": [
            {"role": "user", "content": "<b>not bold</b>"},
            {"role": "assistant", "content": hostile},
        ],
    }
    page.evaluate(
        "c => { localStorage.setItem('pyllama.conversations', JSON.stringify([c]));"
        " localStorage.setItem('pyllama.current', JSON.stringify(c.id)); }",
        conv,
    )
    page.reload()
    page.wait_for_selector(".message.assistant .content strong")
    page.click(".message.assistant a")  # the javascript: link was stripped: nothing runs
    assert page.evaluate("window.__pwned") is None
    assert page.locator(".message.assistant script, .message.assistant [onerror]").count() == 0
    assert page.text_content(".message.user .content") == "<b>not bold</b>"  # user text is text
    assert page.locator(".message.assistant pre code.hljs").count() == 1
    assert page.locator(".message.assistant pre button.copy").count() == 1


def test_edit_resends_from_that_message_and_shift_enter_is_a_new_line(page: Any) -> None:
    set_settings(page, max_tokens=4)
    page.fill("#input", "line one")
    page.press("#input", "Shift+Enter")
    page.type("#input", "line two")
    assert page.input_value("#input") == "line one\nline two" and page.locator(".message").count() == 0
    page.press("#input", "Enter")
    page.wait_for_selector(".message.assistant .speed")
    page.once("dialog", lambda d: d.accept("edited"))
    page.click(".message.user button:text('edit')")
    page.wait_for_function("document.querySelector('.message.user .content')?.textContent === 'edited'")
    page.wait_for_selector(".message.assistant .speed")
    assert page.locator(".message").count() == 2  # the old answer went with the old message
    assert page.errors == []


def test_conversations_new_rename_delete_and_export(page: Any) -> None:
    set_settings(page, max_tokens=4)
    send(page, "first")
    page.wait_for_selector(".message.assistant .speed")
    page.click("#new-chat")
    assert page.locator("#conversations li").count() == 2 and page.locator(".message").count() == 0
    page.once("dialog", lambda d: d.accept("renamed"))
    page.dblclick("#conversations li:nth-child(2) span")
    assert page.text_content("#conversations li:nth-child(2) span") == "renamed"
    page.click("#conversations li:nth-child(2)")
    with page.expect_download() as download:
        page.click("#export-chat")
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["name"] == "renamed" and exported["messages"][0]["content"] == "first"
    page.click("#conversations li:nth-child(1) button.delete")
    assert page.locator("#conversations li").count() == 1
    assert page.errors == []


@contextlib.contextmanager
def page_on_own_server(browser: Any, model: Path, name: str, *flags: str) -> Iterator[tuple[str, Any]]:
    """A server with ``flags`` and a page on it; the page's screenshot is kept as ``name``."""
    proc, base = start_server(model, "--threads", "1", "-c", "1024", *flags)
    try:
        context, page = open_page(browser, base)
        yield base, page
        screenshot(page, name)
        context.close()
    finally:
        stop_server(proc)


def test_api_key_guards_the_api_not_the_page_and_the_page_asks_for_it(browser: Any, tiny_model_path: Path) -> None:
    with page_on_own_server(browser, tiny_model_path, "test_api_key_prompt", "--api-key", API_KEY) as (base, page):
        for path in ("/", "/app.js", "/sw.js", "/manifest.webmanifest", "/_app/version.json"):  # as llama-server's
            assert httpx.get(f"{base}{path}").status_code == 200, path
        assert httpx.get(f"{base}/props").status_code == 401
        page.wait_for_function("document.querySelector('#model-name').textContent.includes('API key')")
        page.once("dialog", lambda d: d.accept(API_KEY))
        send(page, "hi")
        page.wait_for_function("document.querySelector('#error').textContent.includes('API key saved')")
        set_settings(page, max_tokens=3)
        send(page, "hi again")
        page.wait_for_selector(".message.assistant .speed")


def test_the_queue_panel_hides_when_the_server_has_neither_route(browser: Any, tiny_model_path: Path) -> None:
    with page_on_own_server(browser, tiny_model_path, "test_queue_panel_hidden", "--no-slots") as (_, page):
        page.wait_for_function("document.querySelector('#model-name').textContent.endsWith('.gguf')")
        page.wait_for_selector("#queue[data-state=off]", state="attached")  # it asked both routes
        assert page.is_hidden("#queue")


def test_no_ui_is_a_404_and_path_serves_another_folder(tiny_model_path: Path, tmp_path: Path) -> None:
    proc, base = start_server(tiny_model_path, "--no-ui", "--threads", "1", "-c", "1024")
    try:
        assert httpx.get(base).status_code == 404 and httpx.get(f"{base}/app.js").status_code == 404
    finally:
        stop_server(proc)
    (tmp_path / "index.html").write_text("<!doctype html><title>mine</title>")
    (tmp_path / "x.txt").write_text("static")
    proc, base = start_server(tiny_model_path, "--path", str(tmp_path), "--threads", "1", "-c", "1024")
    try:
        assert "<title>mine</title>" in httpx.get(base).text and httpx.get(f"{base}/x.txt").text == "static"
    finally:
        stop_server(proc)


def test_against_a_router_the_page_picks_a_model_and_shows_only_a_running_models_queue(
    browser: Any, tiny_model_path: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("tiny-a", "tiny-b"):
        (folder / f"{name}.gguf").symlink_to(tiny_model_path)
    proc, base = start_serve(["--models-dir", str(folder), "-c", "512", "-np", "1", "-t", "1", "--metrics"], folder)
    context, pg = open_page(browser, base)
    try:
        pg.wait_for_selector("#model-select:not([hidden])")
        assert pg.is_hidden("#model-name")
        assert pg.locator("#model-select option").all_text_contents() == ["tiny-a (unloaded)", "tiny-b (unloaded)"]
        pg.select_option("#model-select", "tiny-b")
        set_settings(pg, max_tokens=4, temperature=0)
        send(pg, "Hello")
        pg.wait_for_selector(".message.assistant .speed")
        status = {m["id"]: m["status"]["value"] for m in httpx.get(f"{base}/models").json()["data"]}
        assert status == {"tiny-a": "unloaded", "tiny-b": "loaded"}  # the queue panel loaded nothing
        pg.wait_for_selector("#slots tr.idle")  # the chosen model runs: its slot
        pg.reload()
        pg.wait_for_selector("#model-select:not([hidden])")
        assert pg.input_value("#model-select") == "tiny-b"  # the choice is kept
        assert pg.errors == []  # no request the router refused (no model named, one not loaded)
        screenshot(pg, "router")
    finally:
        context.close()
        stop_server(proc)


def test_the_queue_panel_shows_waiting_requests_by_priority(browser: Any, tiny_model_path: Path) -> None:
    flags = ("-np", "1", "--ignore-eos", "--context-shift", "--metrics")
    with page_on_own_server(browser, tiny_model_path, "test_queue_by_priority", *flags) as (base, page):
        with contextlib.ExitStack() as stack:
            client = stack.enter_context(httpx.Client(base_url=base, timeout=60))
            for priority in (None, 10, 0):  # the first holds the slot (no limit); the others wait
                n_predict = -1 if priority is None else 2
                body = {"prompt": "Once", "stream": True, "n_predict": n_predict, "priority": priority}
                response = stack.enter_context(client.stream("POST", "/completion", json=body))
                assert response.status_code == 200  # open once its first event came: a token, or its place
            shown = "2 waiting (priority 0: 1, priority 10: 1)"
            page.wait_for_function(f"document.querySelector('#throughput').textContent.includes('{shown}')")
