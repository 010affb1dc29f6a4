"""The file tools: ``read_file``, ``write_file`` and ``edit_file`` (exact text replacement).

Contents are handled as bytes, as llama-server handles them as ``std::string``: sizes and limits
count bytes, and a file that is not UTF-8 survives an edit of some other part of it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from .base import Push, Tool
from .io import make_tools_io
from .params import function_definition, prop, required, value_bool, value_int, value_str

__all__ = ["EditFileTool", "ReadFileTool", "WriteFileTool", "normalize_for_fuzzy_match"]

READ_FILE_MAX_SIZE = 16 * 1024
READ_FILE_MAX_SIZE_BASE64 = 32 * 1024 * 1024


def getlines(content: bytes) -> list[bytes]:
    """The lines ``std::getline`` yields: split on ``\\n``, no empty last line after a final one."""
    lines = content.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def _encode(text: str) -> bytes:
    # a lone surrogate (valid in JSON text) must not make the tool fail
    return text.encode("utf-8", "surrogatepass")


class ReadFileTool(Tool):
    name = "read_file"
    display_name = "Read file"
    uses_cwd = True

    def definition(self) -> dict[str, Any]:
        return function_definition(
            self.name,
            "Read the contents of a file. Optionally specify a 1-based line range. "
            'If append_loc is true, each line is prefixed with its line number (e.g. "1\u2192...").',
            {
                "path": prop("string", "Path to the file"),
                "start_line": prop("integer", "First line to read, 1-based (default: 1)"),
                "end_line": prop("integer", "Last line to read, 1-based inclusive (default: end of file)"),
                "append_loc": prop("boolean", "Prefix each line with its line number"),
            },
            ["path"],
        )

    def invoke(self, params: dict[str, Any], push: Push | None = None) -> dict[str, Any] | None:
        path: str = required(params, "path")
        start_line = value_int(params, "start_line", 1)
        end_line = value_int(params, "end_line", -1)  # -1: to the end
        append_loc = value_bool(params, "append_loc", False)
        # set from the x-resp-type header only: the model cannot ask for it
        as_base64 = value_str(params, "resp_type", "") == "base64"

        io = make_tools_io(params)
        size = io.file_size(path)
        if size is None:
            return {"error": "cannot stat file: " + path}
        if as_base64:
            if size > READ_FILE_MAX_SIZE_BASE64:
                return {"error": f"file too large ({size} bytes, max {READ_FILE_MAX_SIZE_BASE64})"}
            content = io.read_file(path)
            if content is None:
                return {"error": "failed to open file: " + path}
            return {"base64": base64.b64encode(content).decode("ascii"), "size_bytes": len(content)}

        if size > READ_FILE_MAX_SIZE and end_line == -1:
            return {
                "error": f"file too large ({size} bytes, max {READ_FILE_MAX_SIZE}). "
                "Use start_line/end_line to read a portion."
            }
        content = io.read_file(path)
        if content is None:
            return {"error": "failed to open file: " + path}
        return {"plain_text_response": _line_range(content, start_line, end_line, append_loc)}


def _line_range(content: bytes, start_line: int, end_line: int, append_loc: bool) -> str:
    """Lines ``start_line..end_line`` (1-based, inclusive), each ending in a newline, cut off with a
    marker before the text would pass the read limit."""
    out = bytearray()
    for lineno, line in enumerate(getlines(content), start=1):
        if lineno < start_line:
            continue
        if end_line != -1 and lineno > end_line:
            break
        out_line = (_encode(f"{lineno}\u2192") if append_loc else b"") + line + b"\n"
        if len(out) + len(out_line) > READ_FILE_MAX_SIZE:
            out += b"[output truncated]"
            break
        out += out_line
    return out.decode("utf-8", "replace")


class WriteFileTool(Tool):
    name = "write_file"
    display_name = "Write file"
    uses_cwd = True
    permission_write = True

    def definition(self) -> dict[str, Any]:
        return function_definition(
            self.name,
            "Write content to a file, creating it (including parent directories) if it does not exist. "
            "May use with edit_file for more complex edits.",
            {"path": prop("string", "Path of the file to write"), "content": prop("string", "Content to write")},
            ["path", "content"],
        )

    def invoke(self, params: dict[str, Any], push: Push | None = None) -> dict[str, Any] | None:
        path: str = required(params, "path")
        content = _encode(required(params, "content"))
        if not make_tools_io(params).write_file(path, content):
            return {"error": "failed to write file: " + path}
        return {"result": "file written successfully", "path": path, "bytes": len(content)}


# ---- edit_file ----

# typographic characters a model tends to type as ASCII (or the reverse), as UTF-8 bytes
_FUZZY_REPLACEMENTS: list[tuple[bytes, bytes]] = [
    *[(bytes([0xE2, 0x80, b]), b"'") for b in (0x98, 0x99, 0x9A, 0x9B)],  # smart single quotes
    *[(bytes([0xE2, 0x80, b]), b'"') for b in (0x9C, 0x9D, 0x9E, 0x9F)],  # smart double quotes
    *[(bytes([0xE2, 0x80, b]), b"-") for b in range(0x90, 0x96)],  # hyphens and dashes
    (b"\xe2\x88\x92", b"-"),  # minus sign
    (b"\xc2\xa0", b" "),  # no-break space
    *[(bytes([0xE2, 0x80, b]), b" ") for b in range(0x82, 0x8B)],  # en quad .. hair space
    (b"\xe2\x80\xaf", b" "),  # narrow no-break space
    (b"\xe2\x81\x9f", b" "),  # medium mathematical space
    (b"\xe3\x80\x80", b" "),  # ideographic space
]


def _normalize_line(line: bytes) -> bytes:
    line = line.rstrip(b" \t\r")
    for src, dst in _FUZZY_REPLACEMENTS:
        line = line.replace(src, dst)
    return line


def normalize_for_fuzzy_match(content: bytes) -> bytes:
    """Trailing blanks dropped and typographic quotes, dashes and spaces made ASCII, line by line
    (the line count stays, so a match maps back to the original's lines)."""
    return b"\n".join(_normalize_line(line) for line in content.split(b"\n"))


def _lines_with_endings(content: bytes) -> list[bytes]:
    """Lines split on ``\n`` only, each keeping its ``\n`` (bytes.splitlines would split on ``\r``)."""
    parts = content.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    return lines + [parts[-1]] if parts[-1] else lines


def _count(content: bytes, needle: bytes) -> int:
    return content.count(needle) if needle else 0  # non-overlapping, as upstream counts


@dataclass
class _Match:
    edit_index: int
    start: int  # offset in the base content (normalised when any edit needed fuzzy matching)
    length: int
    new_text: bytes


def _apply(content: bytes, matches: list[_Match], offset: int = 0) -> bytes:
    """Splice ``matches`` (ascending, disjoint, offsets relative to ``offset``) into ``content``."""
    for m in reversed(matches):
        i = m.start - offset
        content = content[:i] + m.new_text + content[i + m.length :]
    return content


def _line_range_of(spans: list[tuple[int, int]], start: int, length: int) -> tuple[int, int] | None:
    """The lines (``[first, last)``) a byte range of the base content touches."""
    first = next((i for i, (a, b) in enumerate(spans) if a <= start < b), None)
    if first is None:
        return None
    last = first
    while last < len(spans) and spans[last][1] < start + length:
        last += 1
    return (first, last + 1) if last < len(spans) else None


def _apply_keeping_lines(original: bytes, base: bytes, matches: list[_Match]) -> bytes:
    """Like ``_apply`` on the normalised ``base``, but every line no edit touches is copied from
    ``original``: fuzzy matching must not strip the rest of the file's trailing blanks or quotes."""
    original_lines = _lines_with_endings(original)
    spans: list[tuple[int, int]] = []
    offset = 0
    for line in _lines_with_endings(base):
        spans.append((offset, offset + len(line)))
        offset += len(line)
    groups: list[tuple[int, int, list[_Match]]] = []  # [first, last) lines, and their edits
    for m in matches:
        rng = _line_range_of(spans, m.start, m.length)
        if rng is None:  # only an empty normalised needle gets here: nothing to keep line by line
            return _apply(base, matches)
        if groups and rng[0] < groups[-1][1]:
            first, last, reps = groups[-1]
            groups[-1] = (first, max(last, rng[1]), [*reps, m])
        else:
            groups.append((rng[0], rng[1], [m]))
    out = bytearray()
    next_line = 0
    for first, last, reps in groups:
        out += b"".join(original_lines[next_line:first])
        start, end = spans[first][0], spans[last - 1][1]
        out += _apply(base[start:end], reps, start)
        next_line = last
    out += b"".join(original_lines[next_line:])
    return bytes(out)


class EditFileTool(Tool):
    name = "edit_file"
    display_name = "Edit file"
    uses_cwd = True
    permission_write = True

    def definition(self) -> dict[str, Any]:
        edit_item = {
            "type": "object",
            "properties": {
                "old_text": prop(
                    "string",
                    "Exact text to find; must be unique in the file and must not overlap with other edits",
                ),
                "new_text": prop("string", "Text to replace old_text with"),
            },
            "required": ["old_text", "new_text"],
        }
        return function_definition(
            self.name,
            "Edit a file using exact text replacement. Each edits[].old_text must be unique in the file "
            "and is matched against the original content, not incrementally. Merge nearby changes into "
            "one edit instead of overlapping edits. Use write_file to replace the whole file.",
            {
                "path": prop("string", "Path to the file to edit"),
                "edits": {
                    "type": "array",
                    "description": "One or more exact text replacements to apply",
                    "items": edit_item,
                },
            },
            ["path", "edits"],
        )

    def invoke(self, params: dict[str, Any], push: Push | None = None) -> dict[str, Any] | None:
        path: str = required(params, "path")
        edits_json = required(params, "edits", object)
        if not isinstance(edits_json, list) or not edits_json:
            return {"error": '"edits" must be a non-empty array'}
        edits: list[tuple[bytes, bytes]] = []
        for e in edits_json:
            old_text = _encode(required(e, "old_text"))
            new_text = _encode(required(e, "new_text"))
            if not old_text:
                return {"error": f"edits[{len(edits)}].old_text must not be empty"}
            edits.append((old_text, new_text))

        io = make_tools_io(params)
        original = io.read_file(path)
        if original is None:
            return {"error": "failed to open file: " + path}
        result = _edit(original, edits, path)
        if isinstance(result, str):
            return {"error": result}
        if not io.write_file(path, result):
            return {"error": "failed to write file: " + path}
        return {"result": "file edited successfully", "path": path, "edits_applied": len(edits)}


def _edit(original: bytes, edits: list[tuple[bytes, bytes]], path: str) -> bytes | str:
    """The edited content, or the error message."""
    fuzzy_original = normalize_for_fuzzy_match(original)
    # when one old_text only matches after normalisation, every edit is matched on normalised text
    any_fuzzy = False
    for i, (old, _) in enumerate(edits):
        if old in original:
            continue
        if normalize_for_fuzzy_match(old) not in fuzzy_original:
            return f"could not find edits[{i}].old_text in {path}, it must match the file's current content exactly"
        any_fuzzy = True
    base = fuzzy_original if any_fuzzy else original

    matches: list[_Match] = []
    for i, (old, new) in enumerate(edits):
        # uniqueness is judged on normalised text, so a duplicate differing in blanks still counts
        occurrences = _count(fuzzy_original, normalize_for_fuzzy_match(old))
        if occurrences > 1:
            return f"found {occurrences} occurrences of edits[{i}].old_text in {path}, it must be unique"
        needle = normalize_for_fuzzy_match(old) if any_fuzzy else old
        matches.append(_Match(i, base.find(needle), len(needle), new))

    matches.sort(key=lambda m: m.start)
    for prev, cur in zip(matches, matches[1:], strict=False):  # neighbours
        if prev.start + prev.length > cur.start:
            return (
                f"edits[{prev.edit_index}] and edits[{cur.edit_index}] overlap in {path}; "
                "merge them into one edit or target disjoint regions"
            )

    new_content = _apply_keeping_lines(original, base, matches) if any_fuzzy else _apply(base, matches)
    if new_content == original:
        return "no changes made: the replacement(s) produced identical content"
    return new_content
