"""Directory listings for the search tools: the host's own walker, and the pieces that read a listing
command's output (``git ls-files``, ``find``) the same way on the host and in an isolate."""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = [
    "GIT_LS_FILES_MAX_OUTPUT",
    "JUNK_DIR_NAMES",
    "LIST_ENTRIES_TIMEOUT",
    "ListEntry",
    "ListKind",
    "ListResult",
    "entry_depth",
    "split_lines",
    "walk_entries",
]

GIT_LS_FILES_MAX_OUTPUT = 8 * 1024 * 1024
LIST_ENTRIES_TIMEOUT = 15  # seconds, for one listing (git, then the walker on the host)

# reported by a listing but never descended into: they can be enormous
JUNK_DIR_NAMES = (
    ".git", ".svn", ".hg", "node_modules", "__pycache__",
    ".venv", "venv", "dist", "build", "target", ".cache", ".idea", ".vscode",
)  # fmt: skip


class ListKind(enum.Enum):
    FILES = "file"
    DIRS = "dir"
    ALL = "all"


@dataclass
class ListEntry:
    rel: str  # '/'-separated, relative to the listing's base
    is_dir: bool = False


@dataclass
class ListResult:
    entries: list[ListEntry] = field(default_factory=list)
    err: str = ""  # set when the base is not a directory
    truncated: bool = False  # the walk could not see everything (time budget, unreadable subtree)


def _scan(path: str, out: ListResult) -> Iterator[os.DirEntry[str]]:
    """A directory's entries; an error ends the walk of that directory and marks the result."""
    try:
        it = os.scandir(path)
    except PermissionError:
        return  # skipped quietly, as std::filesystem's skip_permission_denied does
    except OSError:
        out.truncated = True
        return
    with it:
        while True:
            try:
                entry = next(it)
            except StopIteration:
                return
            except OSError:
                out.truncated = True
                return
            yield entry


def _is_link(entry: os.DirEntry[str]) -> bool:
    # a link can point back at an ancestor, so it is never walked (an unreadable one neither)
    try:
        return entry.is_symlink()
    except OSError:
        return True


def walk_entries(base: str, max_depth: int, kind: ListKind, deadline: float) -> ListResult:
    """The host walker: depth-first, links not followed, junk directories listed but not entered."""
    out = ListResult()
    want_dirs, want_files = kind is not ListKind.FILES, kind is not ListKind.DIRS
    stack: list[tuple[str, str, int]] = [(base, "", 0)]
    while stack:
        if time.monotonic() >= deadline:
            out.truncated = True
            return out
        path, rel_dir, depth = stack.pop()
        for entry in _scan(path, out):
            if time.monotonic() >= deadline:
                out.truncated = True
                return out
            rel = rel_dir + "/" + entry.name if rel_dir else entry.name
            try:
                is_dir = entry.is_dir()
                is_file = not is_dir and entry.is_file()
            except OSError:
                continue
            if is_dir:
                if want_dirs:
                    out.entries.append(ListEntry(rel, True))
                if entry.name in JUNK_DIR_NAMES or _is_link(entry):
                    continue
                if max_depth == 0 or depth + 1 < max_depth:
                    stack.append((entry.path, rel, depth + 1))
            elif is_file and want_files:
                out.entries.append(ListEntry(rel, False))
    return out


def entry_depth(rel: str) -> int:
    """Depth of a ``/``-separated relative path: ``a/b/c`` is 3."""
    return 1 + rel.count("/")


def split_lines(text: str, strip_dot_slash: bool) -> list[str]:
    """Non-empty lines of a listing command's output, CRs dropped, separators made ``/``."""
    out: list[str] = []
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if not line:
            continue
        if strip_dot_slash and line.startswith("./"):
            line = line[2:]
        out.append(line.replace("\\", "/"))
    return out
