"""Running a command for a tool: raw output chunks as they come, a size cap that keeps draining,
a timeout and an early stop that kill the whole process group."""

from __future__ import annotations

import codecs
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ChunkSink", "ExecResult", "run_subprocess"]

READ_CHUNK = 4096

# a streamed command's sink: False when nobody listens any more, which stops the process
ChunkSink = Callable[[str], bool]


@dataclass
class ExecResult:
    output: bytes = b""
    exit_code: int = -1
    timed_out: bool = False

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")


class _Utf8Sink:
    """Decodes raw chunks for a sink: a chunk may end inside a UTF-8 sequence."""

    def __init__(self, sink: ChunkSink) -> None:
        self.sink = sink
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def __call__(self, data: bytes, final: bool = False) -> bool:
        text = self.decoder.decode(data, final)
        return self.sink(text) if text else True  # an empty chunk is never sent


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    # the whole session: `sh -c` children (a pipeline, a sleep) would otherwise outlive the shell
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _feed_stdin(proc: subprocess.Popen[bytes], data: bytes | None) -> None:
    # stdin is always closed: a transport client (docker exec -i, ssh) waits for EOF otherwise
    assert proc.stdin is not None
    try:
        if data:
            proc.stdin.write(data)  # a short write is no error by itself: the exit code decides
        proc.stdin.close()
    except OSError:
        pass


def _drain(proc: subprocess.Popen[bytes], max_output: int, sink: _Utf8Sink | None) -> tuple[bytes, bool]:
    """Read stdout in raw chunks until EOF; past ``max_output`` keep reading (a full pipe would
    block the child) but drop the bytes. Returns the kept output and whether some was dropped."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    out = bytearray()
    truncated = stopped = False
    while True:
        try:
            data = os.read(fd, READ_CHUNK)
        except OSError:
            break
        if not data:
            break
        if truncated:
            continue
        if len(out) + len(data) <= max_output:
            out += data
            if sink is not None and not sink(data):
                stopped = True
                _kill_group(proc)
                break
        else:
            kept = data[: max(0, max_output - len(out))]
            out += kept
            if sink is not None and kept:
                sink(kept)
            truncated = True
    if sink is not None and not stopped:
        sink(b"", final=True)
    return bytes(out), truncated


def run_subprocess(
    args: list[str],
    max_output: int,
    timeout_secs: int,
    on_chunk: ChunkSink | None = None,
    combine_stderr: bool = True,
    cwd: str = "",
    stdin_data: bytes | None = None,
) -> ExecResult:
    """Run ``args`` (no shell), killing its process group after ``timeout_secs``. ``on_chunk`` sees
    the output as it is read and stops the process by returning False. ``combine_stderr`` is off
    where stdout must stay pure (a file's bytes); stderr is then discarded."""
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if combine_stderr else subprocess.DEVNULL,
            cwd=cwd or None,
            start_new_session=True,
        )
    except (OSError, ValueError):
        return ExecResult(output=b"failed to spawn process")
    done = threading.Event()
    timed_out = threading.Event()

    def watchdog() -> None:
        if not done.wait(max(0, timeout_secs)):
            timed_out.set()
            _kill_group(proc)

    watcher = threading.Thread(target=watchdog, name="tool-timeout", daemon=True)
    watcher.start()
    try:
        _feed_stdin(proc, stdin_data)
        output, truncated = _drain(proc, max_output, _Utf8Sink(on_chunk) if on_chunk else None)
    except BaseException:
        _kill_group(proc)  # a failing sink must not leave the command running until its timeout
        raise
    finally:
        done.set()
        watcher.join()
        code = proc.wait()  # reaped only now, so the killed group id could not have been reused
        if proc.stdout is not None:
            proc.stdout.close()
    if truncated:
        output += b"\n[output truncated]"
    # a signal death reads as EXIT_FAILURE, as in the C subprocess library llama-server uses
    return ExecResult(output, code if code >= 0 else 1, timed_out.is_set())
