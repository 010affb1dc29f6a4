"""A small stand-in for the Hugging Face Hub, on a loopback port, for the download tests: the few
routes ``huggingface_hub`` and llama.cpp's downloader use to find a repo's revision, list its files
and download one. Tests point ``HF_ENDPOINT`` at it, so nothing reaches the internet. It records the
requests it gets, and can hold a download half-way (``hold``) until the test lets it go on.

Also used by ``scripts/upstream_server_shim.py`` (stdlib only, so the suite's venv can load it)."""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class Hub:
    def __init__(self, repos: dict[str, dict[str, Path]]) -> None:
        """``repos``: repo id -> {file name in the repo: local file with its bytes}."""
        self.repos = repos
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self.url = ""
        # (bytes sent first, event): a download stops after that many bytes until the event is set
        self.hold: tuple[int, threading.Event] | None = None

    def downloads(self, name: str) -> int:
        """How many times a file's bytes were sent (GETs of its resolve URL)."""
        return sum(1 for m, p in self.requests if m == "GET" and "/resolve/" in p and p.endswith("/" + name))

    def handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self._answer()

            def do_GET(self) -> None:
                self._answer()

            def _answer(self) -> None:
                path = unquote(urlparse(self.path).path)
                hub.requests.append((self.command, path))
                for repo, files in hub.repos.items():
                    if path == f"/api/models/{repo}/refs":
                        refs = {"branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": COMMIT}]}
                        return self._send(200, json.dumps(refs).encode(), "application/json")
                    if path.startswith(f"/api/models/{repo}/tree/"):
                        listing = [
                            {"type": "file", "path": name, "size": f.stat().st_size, "oid": _digest(f, "sha1"),
                             "lfs": {"oid": _digest(f, "sha256"), "size": f.stat().st_size, "pointerSize": 134}}
                            for name, f in files.items()
                        ]  # fmt: skip
                        return self._send(200, json.dumps(listing).encode(), "application/json")
                    prefix = f"/{repo}/resolve/"
                    if path.startswith(prefix):
                        name = path[len(prefix) :].partition("/")[2]
                        if name in files:
                            data = files[name].read_bytes()
                            etag = _digest(files[name], "sha256")
                            return self._send(200, data, "application/octet-stream", {"ETag": f'"{etag}"'})
                        return self._send(404, b'{"error":"Entry not found"}', "application/json",
                                          {"X-Error-Code": "EntryNotFound"})  # fmt: skip
                self._send(404, b'{"error":"Repository not found"}', "application/json",
                           {"X-Error-Code": "RepoNotFound"})  # fmt: skip

            def _send(self, status: int, body: bytes, kind: str, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Repo-Commit", COMMIT)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if self.command == "HEAD":
                    return
                held = hub.hold if "/resolve/" in self.path else None
                if held is not None and len(body) > held[0]:
                    self.wfile.write(body[: held[0]])
                    self.wfile.flush()
                    held[1].wait(60)
                    body = body[held[0] :]
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a cancelled download)

        return Handler


@functools.cache
def _digest(f: Path, algorithm: str) -> str:
    """sha1 is git's blob id (the listing's ``oid``), sha256 the LFS id and the download's ETag."""
    return hashlib.new(algorithm, f.read_bytes()).hexdigest()


@contextmanager
def running_hub(repos: dict[str, dict[str, Path]]) -> Iterator[Hub]:
    hub = Hub(repos)
    server = ThreadingHTTPServer(("127.0.0.1", 0), hub.handler())
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="hub-standin", daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
