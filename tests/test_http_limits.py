"""Limits like a production server's: body size, queue bound, request timeout, caps on a request."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
from http_server import start_server, stop_server


@pytest.fixture(scope="module")
def limited(tiny_model_path):
    proc, base = start_server(
        tiny_model_path,
        *("--threads", "1", "-np", "1", "-c", "4096", "--max-queue", "1", "--max-body-size", "100000"),
        *("--n-probs-max", "5", "--n-predict-max", "4000", "--metrics"),
    )
    yield base
    out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]
    assert "no thread left" in out


def long_request(n: int = 3000) -> dict:
    return {"prompt": "Once", "n_predict": n, "temperature": 0, "ignore_eos": True}


def test_a_huge_body_is_refused_before_it_is_read(limited):
    port = int(limited.rsplit(":", 1)[1])
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        # announce 64 MiB and send none of it: the answer must not wait for the body
        s.sendall(b"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
        s.sendall(b"Content-Length: 67108864\r\n\r\n")
        head = s.recv(4096).decode()
    assert head.startswith("HTTP/1.1 413"), head
    assert time.perf_counter() - t0 < 1.0
    assert httpx.get(f"{limited}/health").status_code == 200
    # a chunked body (no Content-Length) is cut off as it streams in
    chunks = (b"x" * 50_000 for _ in range(10))
    r = httpx.post(f"{limited}/completion", content=chunks, timeout=30)
    assert r.status_code == 413


def test_over_the_queue_bound_is_a_503_with_retry_after(limited):
    # one slot, one waiting place: of four requests at once, at least one is refused, none is lost
    barrier = threading.Barrier(4)
    codes: list[int] = []
    retry_after: list[str | None] = []

    def client() -> None:
        barrier.wait(30)
        r = httpx.post(f"{limited}/completion", json=long_request(300), timeout=60)
        codes.append(r.status_code)
        retry_after.append(r.headers.get("retry-after"))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(set(codes)) == [200, 503] and len(codes) == 4
    assert all(ra == "1" for code, ra in zip(codes, retry_after, strict=True) if code == 503)
    assert httpx.post(f"{limited}/completion", json=long_request(2)).status_code == 200  # room again


def test_a_request_over_its_time_is_cancelled(tiny_model_path):
    proc, base = start_server(
        tiny_model_path, "--threads", "1", "-np", "1", "-c", "4096", "--timeout", "1", "--metrics"
    )
    try:
        for stream in (False, True):
            t0 = time.perf_counter()
            r = httpx.post(f"{base}/completion", json={**long_request(3900), "stream": stream}, timeout=60)
            if stream:  # the stream ends with an error event
                assert r.status_code == 200 and "longer than 1" in r.text.strip().splitlines()[-1]
            else:
                assert r.status_code == 503 and "longer than 1" in r.json()["error"]["message"]
            assert time.perf_counter() - t0 < 5
            deadline = time.monotonic() + 30
            while "llamacpp:requests_processing 0" not in httpx.get(f"{base}/metrics").text:
                assert time.monotonic() < deadline, "the timed-out request still runs"
                time.sleep(0.05)  # the cancel is asynchronous; poll the public API for its effect
    finally:
        out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def test_caps_on_n_probs_and_n_predict(limited):
    r = httpx.post(f"{limited}/completion", json={"prompt": "x", "n_probs": 6})
    assert r.status_code == 400 and "n_probs" in r.json()["error"]["message"]
    r = httpx.post(f"{limited}/completion", json={"prompt": "x", "n_predict": 4001})
    assert r.status_code == 400 and "n_predict" in r.json()["error"]["message"]
    r = httpx.post(f"{limited}/completion", json={"prompt": "x", "n_predict": 2, "n_probs": 5}).json()
    assert len(r["completion_probabilities"][0]["top_logprobs"]) == 5


def test_64_concurrent_requests_on_2_slots_are_all_answered(tiny_model_path):
    proc, base = start_server(tiny_model_path, "--threads", "1", "-np", "2", "-c", "2048", "--max-queue", "16")
    codes: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(64)

    def client(i: int) -> None:
        barrier.wait(30)
        r = httpx.post(f"{base}/completion", json={**long_request(8), "prompt": f"Client {i}"}, timeout=120)
        with lock:
            codes.append(r.status_code)

    try:
        threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert len(codes) == 64 and set(codes) <= {200, 503}, codes
        assert codes.count(200) >= 18  # the two slots and the sixteen waiting places at least
    finally:
        out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]
