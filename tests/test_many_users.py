"""Many users on one engine, over HTTP: API keys with tenants, weights and priorities
(``--api-key-file``), the order waiting requests take a freed slot in, where each stands (an SSE
comment, ``/queue``, ``/metrics``), and a key's limit of requests in flight.

One slot, held by a request that cannot end on its own (context shift, no token limit) until its
client leaves; every other request waits, so the order they are told is the server's choice, not
a race."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from http_server import read_log, start_server, stop_server

KEYS = """# tenants of this server
sk-alice name=alice
sk-bob name=bob
sk-night name=night priority=10 max_in_flight=2
sk-meter name=meter tpm=20
"""
QUEUED = re.compile(r"^: queued (\d+) of (\d+)$")


@pytest.fixture(scope="module")
def base(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    key_file = tmp_path_factory.mktemp("keys") / "keys.txt"
    key_file.write_text(KEYS)
    args = ["--parallel", "1", "--ctx-size", "512", "--threads", "1", "--context-shift", "--metrics"]
    proc, url = start_server(tiny_model_path, *args, "--api-key-file", str(key_file))
    yield url
    out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


class Stream:
    """A streamed completion, opened once its first event (a token or its place) came."""

    def __init__(self, stack: contextlib.ExitStack, base: str, key: str, **body: object) -> None:
        auth = {"Authorization": f"Bearer {key}"}
        client = stack.enter_context(httpx.Client(base_url=base, timeout=30, headers=auth))
        body = {"prompt": "Once upon a time", "n_predict": 4, "stream": True, **body}
        self.response = stack.enter_context(client.stream("POST", "/completion", json=body))
        assert self.response.status_code == 200, self.response.read()
        self.lines = self.response.iter_lines()

    def places(self, until: tuple[int, int] | None = None) -> list[tuple[int, int]]:
        """The places it was told, up to ``until`` (or to its first token)."""
        seen: list[tuple[int, int]] = []
        for line in self.lines:
            if m := QUEUED.match(line):
                seen.append((int(m[1]), int(m[2])))
                if seen[-1] == until:
                    return seen
            elif line.startswith("data: "):
                return seen
        return seen

    def rest(self) -> str:
        return "\n".join(self.lines)


def hold_the_slot(stack: contextlib.ExitStack, base: str) -> Stream:
    blocker = Stream(stack, base, "sk-alice", n_predict=-1, ignore_eos=True)
    assert blocker.places() == []  # it started at once: its first event is a token
    return blocker


def test_a_tenant_with_queued_requests_does_not_make_another_wait_behind_them(base: str) -> None:
    with contextlib.ExitStack() as stack:
        blocker = hold_the_slot(stack, base)
        a2 = Stream(stack, base, "sk-alice")
        assert a2.places(until=(1, 1)) == [(1, 1)]
        a3 = Stream(stack, base, "sk-alice")
        assert a3.places(until=(2, 2)) == [(2, 2)]
        bob = Stream(stack, base, "sk-bob")  # posted last, served first: alice already holds the slot
        assert bob.places(until=(1, 3)) == [(1, 3)]
        assert a2.places(until=(2, 3)) == [(2, 3)] and a3.places(until=(3, 3)) == [(3, 3)]

        queue = httpx.get(f"{base}/queue", headers={"Authorization": "Bearer sk-bob"}).json()
        assert [(w["position"], w["tenant"]) for w in queue["waiting"]] == [(1, "bob"), (2, "alice"), (3, "alice")]
        metrics = httpx.get(f"{base}/metrics", headers={"Authorization": "Bearer sk-bob"}).text
        assert 'pyllama_yield:requests_waiting{priority="0"} 3' in metrics
        assert "llamacpp:requests_deferred 3" in metrics

        blocker.response.close()  # the blocker's client leaves: its slot frees
        assert bob.places() == []  # bob's next event is a token
        assert '"stop": true' in bob.rest().replace('"stop":true', '"stop": true')
        # alice's waiting requests moved up as bob left the queue, then ran in their order
        assert a2.places() == [(1, 2)]
        assert a3.places() == [(2, 2), (1, 1)]


def test_priority_goes_first_a_key_sets_its_floor_and_limits_its_requests_in_flight(base: str) -> None:
    with contextlib.ExitStack() as stack:
        blocker = hold_the_slot(stack, base)
        night = Stream(stack, base, "sk-night", priority=-5)  # its key's priority (10) is the most it gets
        assert night.places(until=(1, 1)) == [(1, 1)]
        later = Stream(stack, base, "sk-alice", priority=20)
        assert later.places(until=(2, 2)) == [(2, 2)]
        bob = Stream(stack, base, "sk-bob")  # priority 0: before both
        assert bob.places(until=(1, 3)) == [(1, 3)]
        assert night.places(until=(2, 3)) == [(2, 3)] and later.places(until=(3, 3)) == [(3, 3)]

        # the night key may have two requests in flight: its second waits, its third is refused
        second = Stream(stack, base, "sk-night")
        assert second.places(until=(3, 4)) == [(3, 4)]
        refused = httpx.post(
            f"{base}/completion", json={"prompt": "x", "n_predict": 1}, headers={"Authorization": "Bearer sk-night"}
        )
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
        assert "limit is 2" in refused.json()["error"]["message"]

        queue = httpx.get(f"{base}/queue", headers={"Authorization": "Bearer sk-bob"}).json()
        assert [(w["tenant"], w["priority"]) for w in queue["waiting"]] == [
            ("bob", 0),
            ("night", 10),
            ("night", 10),
            ("alice", 20),
        ]
        metrics = httpx.get(f"{base}/metrics", headers={"Authorization": "Bearer sk-bob"}).text
        assert 'pyllama_yield:requests_waiting{priority="10"} 2' in metrics
        blocker.response.close()
        assert bob.places() == []


def test_a_bad_key_file_line_is_refused_with_its_line(tiny_model_path: Path, tmp_path: Path) -> None:
    from pyllama_yield.settings.keys import KeyRing

    bad = tmp_path / "keys.txt"
    bad.write_text("# ok\nsk-1 name=a\nsk-2 weigth=3\n")
    with pytest.raises(ValueError, match=r"line 3: expected .*got 'weigth=3'"):
        KeyRing.load(None, str(bad))
    ring = KeyRing.load("k1,k2", None)
    assert [k.tenant for k in ring.keys.values()] == ["key-1", "key-2"]
    with pytest.raises(ValueError, match="cannot read"):
        KeyRing.load(None, str(tmp_path / "missing"))


def _prompt_tokens_total(base: str) -> float:
    text = httpx.get(f"{base}/metrics", headers={"Authorization": "Bearer sk-bob"}).text
    return float(next(line.split()[1] for line in text.splitlines() if line.startswith("llamacpp:prompt_tokens_total")))


def test_a_more_urgent_request_preempts_a_running_one_which_then_goes_on_where_it_stopped(base: str) -> None:
    """The slot is held by a request that never ends on its own: the urgent one can only finish
    if it takes the slot; the held one then goes on with its state as it was (no prompt token
    evaluated again, its text the same as an uninterrupted run's)."""
    auth = {"Authorization": "Bearer sk-bob"}
    body = {"prompt": "Once upon a time", "temperature": 0, "ignore_eos": True, "cache_prompt": False}
    reference = httpx.post(f"{base}/completion", json={**body, "n_predict": 40}, headers=auth, timeout=60).json()
    with contextlib.ExitStack() as stack:
        low = Stream(stack, base, "sk-bob", **body, n_predict=-1, priority=5)
        pieces: list[str] = []
        for line in low.lines:  # a few tokens before the urgent request comes
            if line.startswith("data: "):
                pieces.append(json.loads(line[6:])["content"])
                if len(pieces) == 10:
                    break
        before = _prompt_tokens_total(base)
        urgent = httpx.post(
            f"{base}/completion", json={"prompt": "Hi", "n_predict": 4, "priority": 0}, headers=auth, timeout=60
        ).json()
        assert urgent["tokens_predicted"] == 4 and urgent["stop"]
        for line in low.lines:
            if line.startswith("data: "):
                pieces.append(json.loads(line[6:])["content"])
                if len(pieces) == 40:
                    break
        assert "".join(pieces) == reference["content"]  # it went on where it stopped
        # only the urgent request's prompt was evaluated meanwhile: the held one's was not again
        assert _prompt_tokens_total(base) - before == urgent["tokens_evaluated"]


def test_a_key_over_its_tokens_per_minute_is_refused_until_they_age_out(base: str) -> None:
    auth = {"Authorization": "Bearer sk-meter"}
    first = httpx.post(f"{base}/completion", json={"prompt": "Hello", "n_predict": 24}, headers=auth, timeout=60)
    assert first.status_code == 200  # under the limit when it came; it spends more than the limit
    refused = httpx.post(f"{base}/completion", json={"prompt": "Hello", "n_predict": 1}, headers=auth, timeout=60)
    assert refused.status_code == 429 and 1 <= int(refused.headers["Retry-After"]) <= 60
    assert "tokens in the last minute, its limit is 20" in refused.json()["error"]["message"]
    other = httpx.post(
        f"{base}/completion", json={"prompt": "Hello", "n_predict": 1}, headers={"Authorization": "Bearer sk-bob"}
    )
    assert other.status_code == 200  # the limit is the key's alone


def test_a_completion_preempted_while_its_prompt_is_evaluated_goes_on_with_the_rest(tiny_model_path: Path) -> None:
    """Small batches (``-b 8``): a long prompt takes a hundred steps, and the urgent request comes as
    it starts, so it takes the slot while the prompt is evaluated (the test holds however late it
    comes: the preempted request never ends on its own). Its first tokens are an uninterrupted
    run's, and its prompt was evaluated once."""
    args = ["--parallel", "1", "--ctx-size", "2048", "--threads", "1", "-b", "8", "-ub", "8", "--context-shift", "-v"]
    proc, url = start_server(tiny_model_path, *args)
    try:
        prompt = " ".join(f"word{i}" for i in range(400))
        body = {"prompt": prompt, "temperature": 0, "cache_prompt": False, "ignore_eos": True}
        reference = httpx.post(f"{url}/completion", json={**body, "n_predict": 8}, timeout=120).json()
        low_body = {**body, "n_predict": -1, "stream": True, "return_progress": True, "timings_per_token": True}
        with (
            httpx.Client(base_url=url, timeout=120) as client,
            client.stream("POST", "/completion", json={**low_body, "priority": 3}) as low,
        ):
            events = (json.loads(line[6:]) for line in low.iter_lines() if line.startswith("data: "))
            first = next(events)
            assert first["prompt_progress"]["processed"] < first["prompt_progress"]["total"]  # it started
            urgent = httpx.post(f"{url}/completion", json={"prompt": "Hi", "n_predict": 2}, timeout=120).json()
            assert urgent["tokens_predicted"] == 2  # it could only end by taking the slot
            steps = []
            for e in events:
                if e.get("tokens"):
                    steps.append(e)
                    if len(steps) == 8:
                        break
        assert "".join(e["content"] for e in steps) == reference["content"]  # it went on where it stopped
        # its prompt's tokens were each evaluated once: the part before the preemption was kept
        assert steps[-1]["timings"]["prompt_n"] == reference["timings"]["prompt_n"]
        log = read_log(proc)
        assert "(priority 3) yields to priority 0" in log and "resumes" in log
    finally:
        out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]
