"""llama-server's built-in tools, called directly (no HTTP, no model): upstream's
tools/server/tests/unit/test_tools_builtin.py cases that need no container engine, plus the limits,
error answers, runtime refusals and glob dialect of server-tools.cpp."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pyllama_yield.tools.base import Tool, ToolError
from pyllama_yield.tools.builtin import BUILTIN_TOOL_NAMES, build_builtin_tools
from pyllama_yield.tools.glob import glob_match, path_glob_match
from pyllama_yield.tools.io import ContainerIO, HostIO, SshIO, make_tools_io
from pyllama_yield.tools.runtime import ContainerRuntime, StaticRuntime, ToolsRuntimeError, make_tools_runtime

GREP_MARKER = "llama_cpp_test_tools_builtin_marker_grep_search"
TOOLS = {t.name: t for t in build_builtin_tools()}


def call(name: str, params: dict[str, Any]) -> dict[str, Any]:
    res = TOOLS[name].invoke(params)
    assert res is not None and "error" not in res, res
    return res


def call_error(name: str, params: dict[str, Any]) -> str:
    res = TOOLS[name].invoke(params)
    assert res is not None and "error" in res, res
    return str(res["error"])


def stream(name: str, params: dict[str, Any], keep: int = -1) -> tuple[list[str], dict[str, Any] | None]:
    """Invoke with a push that collects chunks; after ``keep`` chunks it answers False (client gone)."""
    chunks: list[str] = []

    def push(chunk: str) -> bool:
        chunks.append(chunk)
        return keep < 0 or len(chunks) < keep

    return chunks, TOOLS[name].invoke(params, push)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---- the tool set ----


def test_builtin_names_and_listing() -> None:
    assert BUILTIN_TOOL_NAMES == (
        "read_file", "file_glob_search", "grep_search", "exec_shell_command", "write_file", "edit_file", "get_info",
    )  # fmt: skip
    tools = build_builtin_tools()
    assert [t.name for t in tools] == list(BUILTIN_TOOL_NAMES)
    assert all(isinstance(t, Tool) for t in tools) and tools[0] is not build_builtin_tools()[0]
    by_name = {t.name: t.to_json() for t in tools}
    assert by_name["exec_shell_command"]["permissions"] == {"write": True}
    assert by_name["read_file"]["permissions"] == {"write": False} and by_name["read_file"]["uses_cwd"] is True
    assert [n for n, t in TOOLS.items() if t.support_stream] == ["exec_shell_command"]
    for name, entry in by_name.items():
        assert entry["type"] == "server" and entry["definition"]["function"]["name"] == name
    assert by_name["get_info"]["definition"]["function"]["parameters"] == {"type": "object", "properties": {}}
    assert by_name["grep_search"]["definition"]["function"]["parameters"]["required"] == ["path", "pattern"]


# ---- upstream's cases ----


def test_grep_search_include(tmp_path: Path) -> None:
    write(tmp_path / "deep" / "dir" / "test_tools_builtin.py", f"x = 1\n# {GREP_MARKER}\n")
    write(tmp_path / "other.py", f"# {GREP_MARKER}\n")
    res = call("grep_search", {"path": str(tmp_path), "pattern": GREP_MARKER, "include": "test_tools_builtin.py"})
    text = res["plain_text_response"]
    assert f"deep/dir/test_tools_builtin.py:# {GREP_MARKER}\n" in text
    assert "other.py" not in text
    assert "Total matches: 1" in text


def test_read_file(tmp_path: Path) -> None:
    f = write(tmp_path / "a.py", f"def test_tools_builtin_read_file():\n    '{GREP_MARKER}'\n")
    assert call("read_file", {"path": str(f)})["plain_text_response"] == f.read_text()


def test_write_then_edit_file(tmp_path: Path) -> None:
    path = str(tmp_path / "test.log")
    res = call("write_file", {"path": path, "content": "line1\nline2\nline3\n"})
    assert res == {"result": "file written successfully", "path": path, "bytes": 18}
    assert call("read_file", {"path": path})["plain_text_response"] == "line1\nline2\nline3\n"
    edits = [{"old_text": "line2", "new_text": "line2-edited"}, {"old_text": "line3\n", "new_text": "line3\nline4\n"}]
    res = call("edit_file", {"path": path, "edits": edits})
    assert res == {"result": "file edited successfully", "path": path, "edits_applied": 2}
    assert call("read_file", {"path": path})["plain_text_response"] == "line1\nline2-edited\nline3\nline4\n"


def test_edit_file_rejects_non_unique_old_text(tmp_path: Path) -> None:
    path = str(write(tmp_path / "test.log", "dup\ndup\n"))
    err = call_error("edit_file", {"path": path, "edits": [{"old_text": "dup", "new_text": "changed"}]})
    assert err == f"found 2 occurrences of edits[0].old_text in {path}, it must be unique"


def test_edit_file_rejects_overlapping_edits(tmp_path: Path) -> None:
    path = str(write(tmp_path / "test.log", "line1\nline2\n"))
    edits = [{"old_text": "line1\nline2", "new_text": "a"}, {"old_text": "line2", "new_text": "b"}]
    err = call_error("edit_file", {"path": path, "edits": edits})
    assert err.startswith("edits[0] and edits[1] overlap in ")
    assert (tmp_path / "test.log").read_text() == "line1\nline2\n"


def test_exec_shell_command_stream() -> None:
    chunks, res = stream("exec_shell_command", {"command": "echo hello"})
    assert res is None
    assert len(chunks) >= 2 and all(chunks)
    assert "hello" in "".join(chunks[:-1])
    assert chunks[-1] == "\n[exit code: 0]"


def test_cwd_param(tmp_path: Path) -> None:
    write(tmp_path / "test_tools_builtin.py", GREP_MARKER)
    assert (
        GREP_MARKER in call("read_file", {"path": "test_tools_builtin.py", "cwd": str(tmp_path)})["plain_text_response"]
    )
    # exec_shell_command runs in that directory: a relative file lands there
    call("exec_shell_command", {"command": "echo hello > cwd_marker.txt", "cwd": str(tmp_path)})
    assert (tmp_path / "cwd_marker.txt").read_text() == "hello\n"


def test_cwd_relative_paths(tmp_path: Path) -> None:
    workdir = tmp_path / "workdir"
    write(workdir / "rel.txt", "relative-content")
    cwd = {"cwd": str(workdir)}
    assert "relative-content" in call("read_file", {"path": "rel.txt", **cwd})["plain_text_response"]
    call("write_file", {"path": "sub/out.txt", "content": "written", **cwd})
    assert (workdir / "sub" / "out.txt").read_text() == "written"
    res = call("file_glob_search", {"path": ".", "include": "*.txt", **cwd})
    assert "rel.txt" in res["plain_text_response"] and res["base"] == str(workdir)
    # absolute paths are unaffected by the cwd
    other = write(tmp_path / "other" / "abs.txt", "absolute-content")
    assert "absolute-content" in call("read_file", {"path": str(other), **cwd})["plain_text_response"]


def test_file_glob_search_type_dir_and_all(tmp_path: Path) -> None:
    write(tmp_path / "project-alpha" / "README.md", "alpha")
    write(tmp_path / "project-alpha" / "src" / "main.cpp", "int main() {}")
    write(tmp_path / "project-beta" / "notes.txt", "beta")
    res = call("file_glob_search", {"path": str(tmp_path), "type": "dir"})
    text = res["plain_text_response"]
    for d in ("project-alpha/\n", "project-beta/\n", "project-alpha/src/\n"):
        assert d in text
    assert "README.md" not in text
    types = {e["path"]: e["type"] for e in res["entries"]}
    assert types == {"project-alpha": "dir", "project-alpha/src": "dir", "project-beta": "dir"}
    res = call("file_glob_search", {"path": str(tmp_path), "type": "all", "include": "*proj*"})
    assert sorted(e["path"] for e in res["entries"]) == ["project-alpha", "project-beta"]


def test_file_glob_search_max_depth_and_limit(tmp_path: Path) -> None:
    write(tmp_path / "top.txt", "top")
    write(tmp_path / "a" / "mid.txt", "mid")
    write(tmp_path / "a" / "b" / "deep.txt", "deep")
    (tmp_path / "a" / "b" / "c").mkdir()
    text = call("file_glob_search", {"path": str(tmp_path), "max_depth": 1})["plain_text_response"]
    assert "top.txt" in text and "mid.txt" not in text
    text = call("file_glob_search", {"path": str(tmp_path), "max_depth": 2})["plain_text_response"]
    assert "mid.txt" in text and "deep.txt" not in text
    res = call("file_glob_search", {"path": str(tmp_path), "limit": 1})
    assert len(res["entries"]) == 1
    assert "Total matches: 3" in res["plain_text_response"]
    assert "[1 results limit reached (3 total matches)." in res["plain_text_response"]
    assert call_error("file_glob_search", {"path": str(tmp_path), "limit": 0}) == (
        "invalid limit: 0 (expected 1 or more)"
    )


def test_file_glob_search_junk_dirs(tmp_path: Path) -> None:
    write(tmp_path / "build" / "artifact.txt", "built")
    (tmp_path / "build" / "nested").mkdir()
    write(tmp_path / "node_modules" / "x" / "index.js", "")
    write(tmp_path / "src" / "main.cpp", "int main() {}")
    # a junk directory stays selectable as a working directory...
    res = call("file_glob_search", {"path": str(tmp_path), "type": "dir", "max_depth": 1})
    assert sorted(e["path"] for e in res["entries"]) == ["build", "node_modules", "src"]
    # ...but is never walked
    res = call("file_glob_search", {"path": str(tmp_path), "type": "all"})
    assert sorted(e["path"] for e in res["entries"]) == ["build", "node_modules", "src", "src/main.cpp"]


def test_file_glob_search_rejects_invalid_type_and_missing_dir(tmp_path: Path) -> None:
    err = call_error("file_glob_search", {"path": str(tmp_path), "type": "bogus"})
    assert err == 'invalid type: bogus (expected "file", "dir" or "all")'
    err = call_error("file_glob_search", {"path": "nope", "cwd": str(tmp_path)})
    assert err == "path does not exist or is not a directory: nope"


def test_cwd_with_dot_dot_is_normalised(tmp_path: Path) -> None:
    write(tmp_path / "workdir" / "marker.txt", "marker")
    cwd = str(tmp_path / "workdir" / ".." / "." / "workdir")
    res = call("file_glob_search", {"path": "sub/..", "cwd": cwd})
    assert res["base"] == str(tmp_path / "workdir")
    assert [e["path"] for e in res["entries"]] == ["marker.txt"]
    assert HostIO(str(tmp_path)).resolve("a/./b/../../c/") == str(tmp_path / "c")
    assert HostIO(str(tmp_path)).resolve("../..") == str(tmp_path.parent.parent)
    assert HostIO("").resolve("x") == os.path.join(os.getcwd(), "x")


def test_home_expansion(tmp_path: Path) -> None:
    home = os.environ.get("HOME", "")
    io = HostIO(str(tmp_path))
    if home:
        assert io.resolve("~/a") == os.path.normpath(home + "/a")
        assert io.resolve("~") == os.path.normpath(home)
    assert io.resolve("~user/a") == str(tmp_path / "~user" / "a")


def test_file_glob_search_uses_git_ls_files(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write(tmp_path / ".gitignore", "ignored.txt\n")
    write(tmp_path / "ignored.txt", "x")
    write(tmp_path / "kept.txt", "x")
    write(tmp_path / "d" / "inner.txt", "x")
    res = call("file_glob_search", {"path": str(tmp_path), "include": "*.txt"})
    assert sorted(e["path"] for e in res["entries"]) == ["d/inner.txt", "kept.txt"]
    res = call("grep_search", {"path": str(tmp_path), "pattern": "^x$"})
    assert res["plain_text_response"] == "d/inner.txt:x\nkept.txt:x\n\n---\nTotal matches: 2\n"


# ---- runtimes ----


@pytest.mark.parametrize(
    ("runtime", "message"),
    [
        ("ssh:-oProxyCommand=touch /tmp/pwned", "invalid ssh target: -oProxyCommand=touch /tmp/pwned"),
        ("ssh:", "invalid ssh target: "),
        ("ssh:user@host;rm", "invalid ssh target: user@host;rm"),
        ("docker-container:--privileged", "invalid container id: --privileged"),
        ("podman-container:--privileged", "invalid container id: --privileged"),
        ("docker-container:", "invalid container id: "),
        ("fake:does-not-exist", "unknown tool runtime: fake:does-not-exist"),
        ("docker:busybox", "tool runtime must name a running container: docker:busybox"),
        ("podman:busybox", "tool runtime must name a running container: podman:busybox"),
    ],
)
def test_runtime_refusals(runtime: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(ToolError) as e:
        TOOLS["exec_shell_command"].invoke({"command": f"touch {tmp_path}/ran", "runtime": runtime})
    assert str(e.value) == message
    assert not (tmp_path / "ran").exists()
    # every tool checks the runtime before touching anything
    for name in ("read_file", "write_file", "get_info"):
        with pytest.raises(ToolError, match="runtime|invalid"):
            TOOLS[name].invoke({"path": str(tmp_path / "w"), "content": "x", "runtime": runtime})
    assert not (tmp_path / "w").exists()


def test_isolate_argv() -> None:
    io = make_tools_io({"runtime": "docker-container:abc_1.x-y", "cwd": "/w"})
    assert isinstance(io, ContainerIO) and io.resolve("f") == "/w/f" and io.resolve("/abs") == "/abs"
    assert io.build_argv(["cat", "f"], False) == ["docker", "exec", "abc_1.x-y", "cat", "f"]
    assert io.build_argv(["cat"], True) == ["docker", "exec", "-i", "abc_1.x-y", "cat"]
    ssh = make_tools_io({"runtime": "ssh:me@host.example"})
    assert isinstance(ssh, SshIO)
    argv = ssh.build_argv(["sh", "-c", "echo 'hi' $1", "_", "a b"], False)
    assert argv[:9] == ["ssh", "-o", "BatchMode=yes", "-o", "PasswordAuthentication=no",
                        "-o", "KbdInteractiveAuthentication=no", "-o", "StrictHostKeyChecking=yes"]  # fmt: skip
    assert argv[9:] == ["-n", "me@host.example", "'sh' '-c' 'echo '\\''hi'\\'' $1' '_' 'a b'"]
    # the quoted word is re-parsed by a shell into the very same argv
    out = subprocess.run(["sh", "-c", "for a in " + argv[-1] + '; do printf "<%s>" "$a"; done'], capture_output=True)
    assert out.stdout.decode() == "<sh><-c><echo 'hi' $1><_><a b>"
    assert "-n" not in ssh.build_argv(["cat"], True)


def test_static_runtimes() -> None:
    for spec in ("ssh:me@host", "docker-container:abc", "podman-container:abc"):
        rt = make_tools_runtime(spec)
        assert isinstance(rt, StaticRuntime) and rt.spec() == spec
        rt.close()
    with pytest.raises(ToolsRuntimeError, match="unknown tool runtime: nope") as e:
        make_tools_runtime("nope")
    assert isinstance(e.value, ValueError) and isinstance(e.value, ToolError)
    for bad in ("ssh:-oProxyCommand=x", "docker-container:--privileged"):
        with pytest.raises(ToolsRuntimeError, match="invalid"):
            make_tools_runtime(bad)
    with pytest.raises(ToolsRuntimeError, match=r"--tools-runtime docker:<image> requires an image name"):
        make_tools_runtime("docker:")


@pytest.mark.timeout(30)
def test_container_runtime_lifecycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a stand-in engine: records its argv, then writes the cidfile (argv: run --rm -i --cidfile F
    # image sh) - in that order, since spec() returns once the cidfile is there - then holds on its
    # stdin as the container's shell would, and records that it saw EOF
    engine = tmp_path / "docker"
    engine.write_text(
        f'#!/bin/sh\necho "$@" > {tmp_path}/args\necho "cid-$$" > "$5"\ncat > /dev/null\ntouch {tmp_path}/closed\n'
    )
    engine.chmod(engine.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    rt = make_tools_runtime("docker:busybox")
    assert isinstance(rt, ContainerRuntime)
    first = rt.spec()
    assert first.startswith("docker-container:cid-") and rt.spec() == first
    args = (tmp_path / "args").read_text().split()
    assert args[:4] == ["run", "--rm", "-i", "--cidfile"] and args[5:] == ["busybox", "sh"]
    assert not os.path.exists(args[4])  # the cidfile is cleaned up
    # a container that died is replaced by the next spec()
    assert rt._proc is not None
    rt._proc.kill()
    rt._proc.wait()
    second = rt.spec()
    assert second.startswith("docker-container:cid-") and second != first
    rt.close()
    assert (tmp_path / "closed").exists()  # stdin was closed, and the client waited for
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ToolsRuntimeError, match=r"failed to spawn docker container for tools runtime \(image: x\)"):
        ContainerRuntime("docker:x")


# ---- exec_shell_command ----


@pytest.mark.timeout(30)
def test_exec_shell_command_timeout() -> None:
    start = time.monotonic()
    res = call("exec_shell_command", {"command": "echo before; sleep 5; echo after", "timeout": 1})
    assert time.monotonic() - start < 4
    assert res["plain_text_response"] == "before\n\n[exit code: 1] [exit due to timed out]"


@pytest.mark.timeout(30)
def test_exec_shell_command_timeout_kills_background_children() -> None:
    # the sleep holds the output pipe open after the shell is gone: only a process-group kill ends it
    start = time.monotonic()
    chunks, _ = stream("exec_shell_command", {"command": "sleep 5 & sleep 6", "timeout": 1})
    assert time.monotonic() - start < 4
    assert chunks == ["\n[exit code: 1] [exit due to timed out]"]


@pytest.mark.timeout(30)
def test_exec_shell_command_stream_stops_when_client_leaves() -> None:
    start = time.monotonic()
    chunks, res = stream("exec_shell_command", {"command": "echo start; sleep 5; echo end"}, keep=1)
    assert time.monotonic() - start < 4
    assert res is None and chunks == ["start\n"]  # no exit-code chunk: nobody is listening


@pytest.mark.timeout(30)
def test_exec_shell_command_failing_push_kills_process() -> None:
    def push(chunk: str) -> bool:
        raise RuntimeError("client broke")

    start = time.monotonic()
    with pytest.raises(RuntimeError, match="client broke"):
        TOOLS["exec_shell_command"].invoke({"command": "echo start; sleep 5"}, push)
    assert time.monotonic() - start < 4


def test_exec_shell_command_output_truncated() -> None:
    cmd = "head -c 1000 /dev/zero | tr '\\0' a; echo tail >&2"
    res = call("exec_shell_command", {"command": cmd, "max_output_size": 100})
    assert res["plain_text_response"] == "a" * 100 + "\n[output truncated]\n[exit code: 0]"
    # the size is capped at 16 KB whatever is asked, and a negative one means the cap too
    for size in (1_000_000, -1):
        cmd = "head -c 20000 /dev/zero | tr '\\0' b"
        text = call("exec_shell_command", {"command": cmd, "max_output_size": size})["plain_text_response"]
        assert text == "b" * 16384 + "\n[output truncated]\n[exit code: 0]"
    chunks, _ = stream("exec_shell_command", {"command": cmd, "max_output_size": 10})
    assert "".join(chunks) == "b" * 10 + "\n[exit code: 0]"


def test_exec_shell_command_exit_code_stderr_and_bad_cwd(tmp_path: Path) -> None:
    res = call("exec_shell_command", {"command": "echo out; echo err >&2; exit 3"})
    assert res["plain_text_response"] == "out\nerr\n\n[exit code: 3]"
    res = call("exec_shell_command", {"command": "true", "cwd": str(tmp_path / "missing")})
    assert res["plain_text_response"] == "failed to spawn process\n[exit code: -1]"
    # a chunk boundary inside a UTF-8 character does not garble it
    chunks, _ = stream("exec_shell_command", {"command": "printf '\\303'; sleep 0.2; printf '\\251'"})
    assert "".join(chunks).startswith("\u00e9")


def test_missing_required_param_raises() -> None:
    with pytest.raises(ToolError, match="key 'command' not found"):
        TOOLS["exec_shell_command"].invoke({})
    with pytest.raises(ToolError, match="type must be string, but is number"):
        TOOLS["read_file"].invoke({"path": 3})


def test_get_info(tmp_path: Path) -> None:
    res = call("get_info", {"cwd": str(tmp_path)})
    assert res["cwd"] == str(tmp_path) and res["os"] != "unknown" and res["os"] == res["os"].strip()
    assert call("get_info", {})["cwd"] == os.getcwd()


# ---- read_file ----


def test_read_file_line_ranges_and_append_loc(tmp_path: Path) -> None:
    path = str(write(tmp_path / "f.txt", "a\nb\nc\nd"))
    assert call("read_file", {"path": path})["plain_text_response"] == "a\nb\nc\nd\n"
    assert call("read_file", {"path": path, "start_line": 2, "end_line": 3})["plain_text_response"] == "b\nc\n"
    res = call("read_file", {"path": path, "start_line": 3, "append_loc": True})
    assert res["plain_text_response"] == "3\u2192c\n4\u2192d\n"
    assert call("read_file", {"path": path, "start_line": 9})["plain_text_response"] == ""


def test_read_file_too_large(tmp_path: Path) -> None:
    path = str(write(tmp_path / "big.txt", "".join(f"line {i:05d}\n" for i in range(2000))))  # 22000 bytes
    assert call_error("read_file", {"path": path}) == (
        "file too large (22000 bytes, max 16384). Use start_line/end_line to read a portion."
    )
    res = call("read_file", {"path": path, "start_line": 10, "end_line": 11})
    assert res["plain_text_response"] == "line 00009\nline 00010\n"
    # a range that is still too long is cut at 16 KB
    text = call("read_file", {"path": path, "end_line": 100000})["plain_text_response"]
    assert text.endswith("[output truncated]") and len(text) == 1489 * 11 + len("[output truncated]")
    res = call("read_file", {"path": path, "resp_type": "base64"})
    assert res["size_bytes"] == 22000 and res["base64"].startswith("bGluZSAwMDAwMA")


def test_read_file_errors(tmp_path: Path) -> None:
    assert call_error("read_file", {"path": str(tmp_path / "nope")}) == f"cannot stat file: {tmp_path / 'nope'}"
    assert call_error("read_file", {"path": str(tmp_path)}).startswith("cannot stat file: ")


# ---- edit_file ----


def test_edit_file_fuzzy_match(tmp_path: Path) -> None:
    original = "print(\u201chi\u201d)   \nnext\nkeep \u2018this\u2019  \n"
    f = write(tmp_path / "f.py", original)
    edits = [{"old_text": 'print("hi")\nnext', "new_text": 'print("bye")\nnext'}]
    assert call("edit_file", {"path": str(f), "edits": edits})["edits_applied"] == 1
    # the edited lines take the normalised text; every other line is kept byte for byte
    assert f.read_text() == 'print("bye")\nnext\nkeep \u2018this\u2019  \n'
    # trailing blanks and dashes: "a \u2014 b  " is found as "a - b"
    write(f, "x = 1\na \u2014 b  \ny = 2\n")
    call("edit_file", {"path": str(f), "edits": [{"old_text": "a - b", "new_text": "c"}]})
    assert f.read_text() == "x = 1\nc\ny = 2\n"


def test_edit_file_errors(tmp_path: Path) -> None:
    path = str(write(tmp_path / "f.txt", "one\ntwo \ntwo\n"))
    edit = {"path": path, "edits": [{"old_text": "three", "new_text": "x"}]}
    assert call_error("edit_file", edit) == (
        f"could not find edits[0].old_text in {path}, it must match the file's current content exactly"
    )
    # "two " and "two" are the same once trailing blanks are dropped: not unique
    assert "found 2 occurrences of edits[0].old_text" in call_error(
        "edit_file", {"path": path, "edits": [{"old_text": "two \n", "new_text": "2\n"}]}
    )
    same = {"path": path, "edits": [{"old_text": "one", "new_text": "one"}]}
    assert call_error("edit_file", same) == "no changes made: the replacement(s) produced identical content"
    empty = {"path": path, "edits": [{"old_text": "one", "new_text": "1"}, {"old_text": "", "new_text": "x"}]}
    assert call_error("edit_file", empty) == "edits[1].old_text must not be empty"
    assert call_error("edit_file", {"path": path, "edits": []}) == '"edits" must be a non-empty array'
    missing = {"path": str(tmp_path / "nope"), "edits": [{"old_text": "a", "new_text": "b"}]}
    assert call_error("edit_file", missing) == f"failed to open file: {tmp_path / 'nope'}"
    assert (tmp_path / "f.txt").read_text() == "one\ntwo \ntwo\n"


# ---- grep_search ----


def test_grep_search_options(tmp_path: Path) -> None:
    f = write(tmp_path / "src" / "a.txt", "alpha\nBeta\ngamma\ndelta\nbeta.x\n")
    res = call("grep_search", {"path": str(tmp_path), "pattern": "beta", "ignore_case": True,
                               "return_line_numbers": True})  # fmt: skip
    assert res["plain_text_response"] == "src/a.txt:2:Beta\nsrc/a.txt:5:beta.x\n\n---\nTotal matches: 2\n"
    res = call("grep_search", {"path": str(f), "pattern": "a.x", "literal": True})
    assert res["plain_text_response"] == f"{f}:beta.x\n\n---\nTotal matches: 1\n"
    res = call("grep_search", {"path": str(f), "pattern": "^gamma$", "context_lines": 1})
    assert res["plain_text_response"].startswith(f"{f}-2-Beta\n{f}:3:gamma\n{f}-4-delta\n--\n")
    assert call_error("grep_search", {"path": str(f), "pattern": "("}).startswith("invalid regex: ")
    assert call_error("grep_search", {"path": "nope", "pattern": "x"}) == "path does not exist: nope"
    none = call("grep_search", {"path": str(tmp_path), "pattern": "alpha", "exclude": "src/*.txt"})
    assert "Total matches: 1" in none["plain_text_response"]  # "**/src/*.txt" needs a '/' before src
    none = call("grep_search", {"path": str(tmp_path), "pattern": "alpha", "exclude": "*.txt"})
    assert "Total matches: 0" in none["plain_text_response"]


def test_grep_search_limit(tmp_path: Path) -> None:
    write(tmp_path / "many.txt", "hit\n" * 150)
    text = call("grep_search", {"path": str(tmp_path), "pattern": "hit"})["plain_text_response"]
    assert text.count("many.txt:hit\n") == 100
    assert text.endswith(
        "Total matches: 100\n[100 matches limit reached. Narrow the path/pattern/include to see more.]\n"
    )


# ---- glob dialect ----


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("*.cpp", "main.cpp", True),
        ("*.cpp", "src/main.cpp", False),  # '*' does not cross '/'
        ("**.cpp", "src/main.cpp", True),
        ("src/**/*.cpp", "src/a/b/main.cpp", True),
        ("src/**/*.cpp", "src/main.cpp", False),  # the "/" after ** still needs matching
        ("**/main.cpp", "main.cpp", False),
        ("**", "", True),
        ("", "", True),
        ("", "a", False),
        ("?.txt", "a.txt", True),
        ("?.txt", "/.txt", False),
        ("?", "", False),
        ("[abc].txt", "b.txt", True),
        ("[!abc].txt", "b.txt", False),
        ("[!abc].txt", "d.txt", True),
        ("[a-c]x", "bx", True),
        ("[a-c]x", "dx", False),
        ("[]]", "]", True),
        ("[-a]", "-", True),
        ("[a-]", "-", True),
        ("[!]", "z", True),
        ("[abc", "[abc", True),  # unterminated class: '[' is literal
        ("[abc", "a", False),
        ("a*b*c", "aXbYc", True),
        ("a*b*c", "aXbY/c", False),
        ("*" * 30 + "x", "a" * 40, False),  # no exponential blow-up
        ("**a" * 20, "a" * 60 + "b", False),
    ],
)
def test_glob_match(pattern: str, text: str, expected: bool) -> None:
    assert glob_match(pattern, text) is expected


def test_path_glob_match() -> None:
    assert path_glob_match("*.cpp", "deep/dir/main.cpp")  # basename at any depth
    assert not path_glob_match("*.cpp", "deep/main.cpp/x")
    assert path_glob_match("src/*.cpp", "x/src/main.cpp")
    assert not path_glob_match("src/*.cpp", "src/main.cpp")  # as upstream: "**/src/*.cpp" needs x/src
    assert path_glob_match("**/src/*.cpp", "a/src/b.cpp")
    assert path_glob_match("**/*.cpp", "a/b.cpp")
    assert not path_glob_match("/src/*.cpp", "src/a.cpp")
    assert path_glob_match("*", "a/b/c")
