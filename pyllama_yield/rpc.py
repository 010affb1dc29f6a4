"""llama.cpp's RPC backend: a model's layers on ggml devices that other processes (other machines)
lend through ``rpc-server``; both sides, bound from ``ggml-rpc.h``.

- :func:`connect` (``serve --rpc``, ``Llama(rpc_servers=...)``): checks each endpoint with the
  protocol's HELLO before llama.cpp sees it (llama.cpp aborts the process on an endpoint it cannot
  reach), then registers its devices; models loaded afterwards offload to them (``n_gpu_layers``).
- :func:`serve` (``python -m pyllama_yield rpc-server``): lends this machine's devices.

RPC is unauthenticated and unencrypted, as upstream warns: private networks only.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from ._native import backend_function, ffi, lib
from .devices import Device, _reg_devices

__all__ = ["RpcError", "connect", "default_cache_dir", "parse_endpoint", "probe", "serve", "server_devices"]

log = logging.getLogger("pyllama_yield.rpc")

DEFAULT_PORT = 50052
_CMD_HELLO = 14  # fixed across protocol versions, so that any two versions can tell they differ
_CONN_CAPS_SIZE = 24  # rpc_msg_hello_req: the transport capabilities a client offers (none here)
_HELLO_REPLY_SIZE = 4 + _CONN_CAPS_SIZE  # major, minor, patch, padding, then the server's caps


class RpcError(ConnectionError):
    """An rpc-server that cannot be used: unreachable, not an rpc-server, or another protocol."""


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    """``host:port`` as llama.cpp reads it (the host is what comes before the first colon)."""
    host, sep, port = endpoint.strip().partition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad rpc-server endpoint {endpoint!r}: expected host:port")
    return host, int(port)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise RpcError("it closed the connection during the handshake")
        data += chunk
    return data


def listening(endpoint: str, timeout_s: float = 2.0) -> bool:
    """Whether anything accepts a connection at ``endpoint``. No HELLO: an rpc-server serves one
    client at a time, and the caller may well be that client (a HELLO would then wait)."""
    host, port = parse_endpoint(endpoint)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def probe(endpoint: str, timeout_s: float = 5.0) -> tuple[int, int, int]:
    """Connect to ``endpoint`` and exchange the protocol's HELLO; returns the server's version.
    Raises :class:`RpcError` naming the endpoint when that fails (where llama.cpp would abort)."""
    host, port = parse_endpoint(endpoint)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(struct.pack("<BQ", _CMD_HELLO, _CONN_CAPS_SIZE) + bytes(_CONN_CAPS_SIZE))
            (size,) = struct.unpack("<Q", _read_exactly(sock, 8))
            if size != _HELLO_REPLY_SIZE:
                raise RpcError(f"its HELLO reply has {size} bytes, not {_HELLO_REPLY_SIZE}")
            major, minor, patch = _read_exactly(sock, _HELLO_REPLY_SIZE)[:3]
    except TimeoutError as exc:
        raise RpcError(
            f"rpc-server at {endpoint} did not answer within {timeout_s:g} s "
            "(an rpc-server serves one client at a time: is another one connected?)"
        ) from exc
    except RpcError as exc:
        raise RpcError(f"{endpoint} is not a usable rpc-server: {exc}") from exc
    except OSError as exc:
        raise RpcError(f"cannot reach rpc-server at {endpoint}: {exc.strerror or exc}") from exc
    if major != lib.RPC_PROTO_MAJOR_VERSION or minor > lib.RPC_PROTO_MINOR_VERSION:
        ours = f"{lib.RPC_PROTO_MAJOR_VERSION}.{lib.RPC_PROTO_MINOR_VERSION}"
        raise RpcError(
            f"rpc-server at {endpoint} speaks RPC protocol {major}.{minor}.{patch}; this build speaks {ours}"
        )
    return major, minor, patch


def add_server(endpoint: str) -> list[Device]:
    """Check ``endpoint`` (:func:`probe`) and register its devices with ggml (once per endpoint)."""
    endpoint = endpoint.strip()
    probe(endpoint)
    add = backend_function("ggml_backend_rpc_add_server", "RPC")
    reg = add(endpoint.encode())
    if reg == ffi.NULL:
        raise RpcError(f"rpc-server at {endpoint} offers no device")
    if not any(lib.ggml_backend_reg_get(i) == reg for i in range(lib.ggml_backend_reg_count())):
        lib.ggml_backend_register(reg)
    return list(_reg_devices(reg))


def connect(endpoints: Iterable[str]) -> dict[str, list[Device]]:
    """Register every endpoint's devices (``serve --rpc a:1,b:2``); the devices by endpoint."""
    found = {e.strip(): add_server(e) for e in endpoints if e.strip()}
    for endpoint, devices in found.items():
        log.info("rpc-server %s: %s", endpoint, ", ".join(f"{d.name} ({d.memory_total >> 20} MiB)" for d in devices))
    return found


# --- the server side -------------------------------------------------------------------------
def default_cache_dir() -> Path:
    """Where ``rpc-server --cache`` keeps tensors it was sent (by content hash), as llama.cpp's:
    ``$LLAMA_CACHE/rpc``, else the platform's cache folder + ``llama.cpp/rpc``."""
    if base := os.environ.get("LLAMA_CACHE"):
        return Path(base) / "rpc"
    if sys.platform == "win32":
        root = Path(os.environ.get("LOCALAPPDATA", Path.home()))
    elif sys.platform == "darwin":
        root = Path.home() / "Library" / "Caches"
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "llama.cpp" / "rpc"


def server_devices(names: Sequence[str] = ()) -> list[object]:
    """The devices an rpc-server lends: those named (``--device``), else every GPU-like device,
    else the CPU (llama.cpp's rpc-server picks the same way). ``ggml_backend_dev_t`` pointers."""
    all_devs = [lib.ggml_backend_dev_get(i) for i in range(lib.ggml_backend_dev_count())]
    if names:
        found = []
        for name in names:
            dev = lib.ggml_backend_dev_by_name(name.encode())
            if dev == ffi.NULL:
                known = ", ".join(ffi.string(lib.ggml_backend_dev_name(d)).decode() for d in all_devs)
                raise ValueError(f"unknown device {name!r} (available: {known})")
            found.append(dev)
        return found
    local = (lib.GGML_BACKEND_DEVICE_TYPE_CPU, lib.GGML_BACKEND_DEVICE_TYPE_ACCEL)
    gpus = [d for d in all_devs if lib.ggml_backend_dev_type(d) not in local]
    if gpus:
        return gpus
    cpu = lib.ggml_backend_dev_by_type(lib.GGML_BACKEND_DEVICE_TYPE_CPU)
    return [] if cpu == ffi.NULL else [cpu]


def serve(host: str, port: int, n_threads: int, devices: Sequence[object], cache_dir: Path | None) -> None:
    """Lend ``devices`` on ``host:port`` until the process ends (llama.cpp's server loop never
    returns while it can accept clients). It runs on a thread of its own, so that this thread
    stays in Python and Ctrl-C stops the process. Raises when the server cannot start."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:  # a clear error, not
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # llama.cpp's "Failed to create server socket"
        try:
            s.bind((host, port))
        except OSError as exc:
            raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    start = backend_function("ggml_backend_rpc_start_server", "RPC")
    devs = ffi.new("ggml_backend_dev_t[]", list(devices))
    cache = ffi.NULL if cache_dir is None else os.fsencode(cache_dir)
    endpoint = f"{host}:{port}".encode()
    ended = threading.Event()

    def run() -> None:
        try:
            start(endpoint, cache, n_threads, len(devices), devs)
        finally:
            ended.set()

    threading.Thread(target=run, name="rpc-server", daemon=True).start()
    while not ended.wait(0.5):  # waking twice a second keeps Ctrl-C responsive
        pass
    raise RuntimeError(f"rpc-server on {host}:{port} stopped (see the lines above for why)")
