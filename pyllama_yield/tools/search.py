"""The search tools: ``file_glob_search`` (names) and ``grep_search`` (contents).

Both list files the same way: ``git ls-files`` when the directory is in a repository (so
.gitignore'd files are skipped), else a walk that leaves junk directories (.git, node_modules,
build...) alone; then the include/exclude globs of ``path_glob_match`` pick among them.
"""

from __future__ import annotations

import re
from typing import Any

from .base import Push, Tool
from .glob import path_glob_match
from .io import make_tools_io
from .listing import ListEntry, ListKind
from .params import function_definition, prop, required, value_bool, value_int, value_str

__all__ = ["FileGlobSearchTool", "GrepSearchTool"]

FILE_SEARCH_MAX_RESULTS = 100
GREP_SEARCH_MAX_RESULTS = 100


def _selected(rel: str, include: str, exclude: str) -> bool:
    return path_glob_match(include, rel) and not (exclude and path_glob_match(exclude, rel))


class FileGlobSearchTool(Tool):
    name = "file_glob_search"
    display_name = "File search"
    uses_cwd = True

    def definition(self) -> dict[str, Any]:
        n = FILE_SEARCH_MAX_RESULTS
        return function_definition(
            self.name,
            "Recursively search for files matching a glob pattern under a directory. "
            "Automatically skips files ignored by .gitignore (when the directory is inside a git repo) "
            "and common junk directories (.git, node_modules, build, dist, etc.) otherwise. "
            "A pattern with no '/' (e.g. \"*.cpp\") matches the file's basename at any depth. "
            "A pattern containing '/' matches the full relative path; unless already anchored with "
            '"**/" or a leading \'/\', it is automatically prefixed with "**/". '
            'Use type="dir" or "all" to also list directories; directory entries are suffixed with \'/\' '
            "in the output. Note: directory listings do not apply .gitignore filtering.",
            {
                "path": prop("string", "Base directory to search in"),
                "include": prop(
                    "string", 'Glob pattern for files to include (e.g. "*.cpp" or "src/**/*.cpp"). Default: **'
                ),
                "exclude": prop("string", "Glob pattern for files to exclude"),
                "type": prop("string", 'Entry type to return: "file" (default), "dir" or "all"'),
                "max_depth": prop(
                    "integer",
                    "Maximum depth to descend into subdirectories (default: 0 = unlimited; 1 = direct children only)",
                ),
                "limit": prop("integer", f"Maximum number of results to return, capped at {n} (default {n})"),
            },
            ["path"],
        )

    def invoke(self, params: dict[str, Any], push: Push | None = None) -> dict[str, Any] | None:
        io = make_tools_io(params)
        path: str = required(params, "path")
        # always absolute (a relative path resolves against the cwd), so a client such as the web
        # page's picker can join the relative entries onto it
        base = io.resolve(path)
        include = value_str(params, "include", "**")
        exclude = value_str(params, "exclude", "")
        type_ = value_str(params, "type", "file")
        max_depth = max(0, value_int(params, "max_depth", 0))
        limit_req = value_int(params, "limit", FILE_SEARCH_MAX_RESULTS)
        if limit_req < 1:
            return {"error": f"invalid limit: {limit_req} (expected 1 or more)"}
        limit = min(limit_req, FILE_SEARCH_MAX_RESULTS)
        kinds = {"file": ListKind.FILES, "dir": ListKind.DIRS, "all": ListKind.ALL}
        if type_ not in kinds:
            return {"error": f'invalid type: {type_} (expected "file", "dir" or "all")'}

        listing = io.list_entries(base, max_depth, kinds[type_])
        if listing.err:
            return {"error": f"{listing.err}: {path}"}
        matches = [e for e in listing.entries if _selected(e.rel, include, exclude)]
        shown = matches[:limit]
        # the text is what the model reads; entries/base are the same for a UI, with no parsing
        text = _listing_text(shown, len(matches), listing.truncated)
        entries = [{"path": e.rel, "type": "dir" if e.is_dir else "file"} for e in shown]
        return {"plain_text_response": text, "entries": entries, "base": base}


def _listing_text(shown: list[ListEntry], total: int, truncated: bool) -> str:
    lines = [e.rel + ("/" if e.is_dir else "") + "\n" for e in shown]
    lines.append(f"\n---\nTotal matches: {total}\n")
    if total > len(shown):
        lines.append(
            f"[{len(shown)} results limit reached ({total} total matches). "
            "Refine the glob pattern to narrow the search.]\n"
        )
    if truncated:
        lines.append("[results truncated: time budget or unreadable directory]\n")
    return "".join(lines)


class GrepSearchTool(Tool):
    name = "grep_search"
    display_name = "Grep search"
    uses_cwd = True

    def definition(self) -> dict[str, Any]:
        return function_definition(
            self.name,
            "Search for a pattern in files under a path. Returns matching lines with file paths "
            "(and, unless searching a single file, paths relative to the given directory). "
            "Automatically skips files ignored by .gitignore (when the directory is inside a git repo) "
            "and common junk directories (.git, node_modules, build, dist, etc.) otherwise. "
            "include/exclude: a pattern with no '/' matches the basename at any depth; a pattern "
            "containing '/' matches the full relative path (auto-anchored with \"**/\" unless already anchored).",
            {
                "path": prop("string", "File or directory to search in"),
                "pattern": prop("string", "Pattern to search for (regular expression unless literal is true)"),
                "include": prop("string", "Glob pattern to filter files (default: **)"),
                "exclude": prop("string", "Glob pattern to exclude files"),
                "return_line_numbers": prop("boolean", "If true, include line numbers in results"),
                "literal": prop(
                    "boolean",
                    "Treat pattern as a literal string instead of a regular expression (default: false)",
                ),
                "ignore_case": prop("boolean", "Case-insensitive search (default: false)"),
                "context_lines": prop(
                    "integer", "Number of lines of context to show before and after each match (default: 0)"
                ),
            },
            ["path", "pattern"],
        )

    def invoke(self, params: dict[str, Any], push: Push | None = None) -> dict[str, Any] | None:
        path: str = required(params, "path")
        pattern: str = required(params, "pattern")
        include = value_str(params, "include", "**")
        exclude = value_str(params, "exclude", "")
        show_lineno = value_bool(params, "return_line_numbers", False)
        ctx_lines = max(0, value_int(params, "context_lines", 0))
        if value_bool(params, "literal", False):
            pattern = re.escape(pattern)
        try:
            rx = re.compile(pattern, re.IGNORECASE if value_bool(params, "ignore_case", False) else 0)
        except re.error as e:
            return {"error": f"invalid regex: {e}"}

        io = make_tools_io(params)
        abs_path = io.resolve(path)
        files: list[tuple[str, str]] = []  # (path to read, path to show)
        if io.is_regular_file(abs_path):
            files.append((abs_path, path))
        elif io.is_directory(abs_path):
            listing = io.list_entries(abs_path, 0, ListKind.FILES)
            if listing.err:
                return {"error": f"{listing.err}: {path}"}
            prefix = abs_path if abs_path.endswith("/") else abs_path + "/"
            files += [(prefix + e.rel, e.rel) for e in listing.entries if _selected(e.rel, include, exclude)]
        else:
            return {"error": "path does not exist: " + path}

        out: list[str] = []
        total, limit_reached = 0, False
        for fpath, shown_path in files:
            content = io.read_file(fpath)
            if content is None:
                continue  # unreadable (gone, permissions): the others are still searched
            total, limit_reached = _grep_lines(content, rx, shown_path, show_lineno, ctx_lines, total, out)
            if limit_reached:
                break
        out.append(f"\n---\nTotal matches: {total}\n")
        if limit_reached:
            out.append(
                f"[{GREP_SEARCH_MAX_RESULTS} matches limit reached. Narrow the path/pattern/include to see more.]\n"
            )
        return {"plain_text_response": "".join(out)}


def _grep_lines(
    content: bytes, rx: re.Pattern[str], shown_path: str, show_lineno: bool, ctx: int, total: int, out: list[str]
) -> tuple[int, bool]:
    """Append one file's matches (``path:line`` and, with context, ``path-line`` around them, groups
    closed by ``--``) to ``out``. Returns the running match count and whether the cap was hit."""
    lines = content.decode("utf-8", "replace").split("\n")
    if lines[-1] == "":
        lines.pop()  # std::getline yields no empty line after a final newline
    show_num = show_lineno or ctx > 0
    for i, line in enumerate(lines):
        if total >= GREP_SEARCH_MAX_RESULTS:
            return total, True
        if not rx.search(line):
            continue
        for j in range(max(0, i - ctx), min(len(lines) - 1, i + ctx) + 1):
            sep = ":" if j == i else "-"
            out.append(shown_path + sep + (f"{j + 1}{sep}" if show_num else "") + lines[j] + "\n")
        if ctx > 0:
            out.append("--\n")
        total += 1
    return total, False
