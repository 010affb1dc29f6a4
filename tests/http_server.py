"""A real ``python -m pyllama_yield serve`` process on a loopback port, for the HTTP tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
LOGS: dict[int, Path] = {}  # pid -> the server's log file
API_KEY = "test-key"
# scripts/gpu_check.sh runs the suite with layers offloaded: every served model gets -ngl N.
GPU_LAYERS = os.environ.get("PYLLAMA_TEST_GPU_LAYERS")
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: Path, *args: str) -> tuple[subprocess.Popen, str]:
    gpu = ["-ngl", GPU_LAYERS] if GPU_LAYERS and "-ngl" not in args else []
    return start_serve(["-m", str(model), *args, *gpu], cwd=model.parent)


def start_serve(args: list[str], cwd: Path) -> tuple[subprocess.Popen, str]:
    """``serve ARGS`` (a router, when they name no model), ready once its /health answers 200."""
    port = int(args[args.index("--port") + 1]) if "--port" in args else free_port()
    # the log goes to a file, not a pipe: a pipe nobody reads fills up (64 KiB) and then blocks
    # the server's next log line, which would look like a hung server
    log = tempfile.NamedTemporaryFile("w+", prefix="pyllama-serve-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyllama_yield", "serve", *([] if "--port" in args else ["--port", str(port)]), *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        # the checkout's code, as the tests import it; the Batch API's data in a folder of its own
        env={**os.environ, "PYLLAMA_DATA_DIR": tempfile.mkdtemp(prefix="pyllama-data-"), "PYTHONPATH": str(REPO)},
    )
    log.close()
    LOGS[proc.pid] = Path(log.name)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {read_log(proc)}")
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.1)  # waiting for a process to listen: nothing to wait on but the port
    proc.kill()
    raise RuntimeError("server did not start")


def read_log(proc: subprocess.Popen) -> str:
    """What the server has written so far (stdout and stderr)."""
    return LOGS[proc.pid].read_text(errors="replace")


def wait_and_read_log(proc: subprocess.Popen) -> str:
    """Wait for the server to exit (60 s at most) and return its whole log."""
    proc.wait(timeout=60)
    out = read_log(proc)
    LOGS.pop(proc.pid).unlink(missing_ok=True)
    return out


def stop_server(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    return wait_and_read_log(proc)
