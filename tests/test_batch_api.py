"""OpenAI's Batch API through the official ``openai`` client: a batch survives a SIGKILL of the
server (every line answered once, a malformed one in the error file), runs behind interactive
requests, and stops when cancelled."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from http_server import start_server, stop_server, wait_and_read_log

DEADLINE_S = 120  # every wait on the server's progress below; a stuck batch fails, it does not hang


def _chat_line(i: int, max_tokens: int) -> str:
    body = {"messages": [{"role": "user", "content": f"Tell story {i}"}], "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True}  # fmt: skip
    return json.dumps({"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body})


def _serve(model: Path, data_dir: Path) -> tuple[Any, openai.OpenAI]:
    args = ["--parallel", "1", "--ctx-size", "2048", "--threads", "1", "--data-dir", str(data_dir), "--slots"]
    proc, base = start_server(model, *args)
    return proc, openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


def _until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)  # the server's progress is only seen by asking it


def _start_batch(client: openai.OpenAI, lines: list[str]) -> str:
    upload = client.files.create(file=("in.jsonl", "\n".join(lines).encode()), purpose="batch")
    assert upload.purpose == "batch" and upload.bytes > 0
    batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert batch.status == "in_progress" and batch.request_counts.total == len(lines)
    return batch.id


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "data"


def test_a_batch_survives_a_sigkill_and_answers_every_line_once(tiny_model_path: Path, data_dir: Path) -> None:
    lines = [_chat_line(i, 64) for i in range(24)]
    lines.insert(12, '{"custom_id": "broken", "method": "POST", "url": ')  # line 13: not JSON
    proc, client = _serve(tiny_model_path, data_dir)
    try:
        batch_id = _start_batch(client, lines)
        _until("3 answers", lambda: client.batches.retrieve(batch_id).request_counts.completed >= 3)
    finally:
        proc.kill()  # SIGKILL: no shutdown, lines in flight lost
        wait_and_read_log(proc)
    with contextlib.closing(sqlite3.connect(data_dir / "batches.sqlite3")) as db:
        [(status,)] = db.execute("SELECT status FROM batches WHERE id = ?", (batch_id,)).fetchall()
        answered = dict(db.execute("SELECT custom_id, answer FROM lines WHERE done AND answer IS NOT NULL"))
    assert status == "in_progress" and 3 <= len(answered) < 24  # killed mid-batch
    proc, client = _serve(tiny_model_path, data_dir)
    try:
        _until("the batch to complete", lambda: client.batches.retrieve(batch_id).status == "completed")
        batch = client.batches.retrieve(batch_id)
        counts = batch.request_counts
        assert (counts.total, counts.completed, counts.failed) == (25, 24, 1)
        assert batch.completed_at and batch.in_progress_at and batch.output_file_id and batch.error_file_id
        out = [json.loads(x) for x in client.files.content(batch.output_file_id).text.splitlines()]
        assert sorted(o["custom_id"] for o in out) == sorted(f"req-{i}" for i in range(24))  # each once
        for o in out:  # a line answered before the kill was not run again: the same answer
            if o["custom_id"] in answered:
                assert o["response"]["body"] == json.loads(answered[o["custom_id"]])
        first = out[0]["response"]
        assert first["status_code"] == 200 and first["body"]["object"] == "chat.completion"
        assert first["body"]["usage"]["completion_tokens"] == 64
        [error] = [json.loads(x) for x in client.files.content(batch.error_file_id).text.splitlines()]
        assert error["response"] is None and error["error"]["message"].startswith("line 13: not JSON")
        assert batch_id in [b.id for b in client.batches.list()]
        with pytest.raises(openai.ConflictError, match="completed"):
            client.batches.cancel(batch_id)
    finally:
        out_log = stop_server(proc)
    assert proc.returncode == 0, out_log[-3000:]


def test_interactive_requests_go_before_the_batch_and_a_cancel_stops_it(tiny_model_path: Path, data_dir: Path) -> None:
    proc, client = _serve(tiny_model_path, data_dir)
    base = str(client.base_url).removesuffix("/v1/")
    try:
        batch_id = _start_batch(client, [_chat_line(i, 200) for i in range(40)])
        # one line runs, one waits for the slot at the last priority; an interactive request
        # posted now is told it is next
        _until("a batch line waiting", lambda: httpx.get(f"{base}/queue").json()["n_waiting"] == 1)
        body = {"prompt": "Hello", "n_predict": 4, "stream": True}
        with httpx.stream("POST", f"{base}/completion", json=body, timeout=60) as r:
            events = list(r.iter_lines())
        assert events[0] == ": queued 1 of 2"
        assert any('"stop":true' in e.replace(" ", "") for e in events)
        assert client.batches.retrieve(batch_id).status == "in_progress"

        cancelling = client.batches.cancel(batch_id)
        assert cancelling.status in ("cancelling", "cancelled")
        _until("the cancel", lambda: client.batches.retrieve(batch_id).status == "cancelled")
        batch = client.batches.retrieve(batch_id)
        assert batch.cancelled_at and batch.request_counts.completed < 40
        done = client.files.content(batch.output_file_id).text.splitlines() if batch.output_file_id else []
        assert len(done) == batch.request_counts.completed
        _until("the slot to free", lambda: httpx.get(f"{base}/slots").json()[0]["is_processing"] is False)
    finally:
        out_log = stop_server(proc)
    assert proc.returncode == 0, out_log[-3000:]


def test_files_and_batches_refuse_what_is_not_theirs(tiny_model_path: Path, data_dir: Path) -> None:
    proc, client = _serve(tiny_model_path, data_dir)
    try:
        with pytest.raises(openai.NotFoundError):
            client.files.retrieve("file-nope")
        with pytest.raises(openai.NotFoundError):
            client.batches.retrieve("batch_nope")
        with pytest.raises(openai.BadRequestError, match="endpoint must be one of"):
            upload = client.files.create(file=("x.jsonl", _chat_line(0, 4).encode()), purpose="batch")
            client.batches.create(input_file_id=upload.id, endpoint="/v1/moderations", completion_window="24h")
        with pytest.raises(openai.BadRequestError, match="purpose"):
            client.files.create(file=("x.jsonl", b"{}"), purpose="nonsense")  # type: ignore[arg-type]
        listed = client.files.list(purpose="batch")
        assert [f.id for f in listed.data] == [upload.id]
        assert client.files.delete(upload.id).deleted
        with pytest.raises(openai.NotFoundError):
            client.files.content(upload.id)
    finally:
        stop_server(proc)


def test_a_batch_at_a_router_runs_each_line_on_the_model_it_names(tiny_model_path: Path, tmp_path: Path) -> None:
    import shutil

    from http_server import start_serve

    models = tmp_path / "models"
    models.mkdir()
    for name in ("tiny-a", "tiny-b"):
        shutil.copy(tiny_model_path, models / f"{name}.gguf")
    args = ["--models-dir", str(models), "-c", "512", "-np", "1", "-t", "1", "--data-dir", str(tmp_path / "data")]
    proc, base = start_serve(args, models)
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    try:
        lines = []
        for i, model in enumerate(["tiny-a", "tiny-b", "tiny-a"]):
            body = {"model": model, "prompt": f"Line {i}", "max_tokens": 3, "temperature": 0}
            lines.append(json.dumps({"custom_id": f"c{i}", "method": "POST", "url": "/v1/completions", "body": body}))
        upload = client.files.create(file=("in.jsonl", "\n".join(lines).encode()), purpose="batch")
        batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/completions", completion_window="24h")
        _until("the batch to complete", lambda: client.batches.retrieve(batch.id).status == "completed")
        done = client.batches.retrieve(batch.id)
        assert done.request_counts.completed == 3 and done.error_file_id is None
        out = {
            o["custom_id"]: o["response"]["body"]
            for o in map(json.loads, client.files.content(done.output_file_id).text.splitlines())
        }
        assert [out[f"c{i}"]["model"] for i in range(3)] == ["tiny-a", "tiny-b", "tiny-a"]
    finally:
        out_log = stop_server(proc)
    assert proc.returncode == 0, out_log[-3000:]
