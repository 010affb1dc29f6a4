"""The glob dialect of llama.cpp's ``common`` (``glob_match``) and the server tools' path rule.

``**`` matches anything including ``/``; ``*`` and ``?`` never cross a ``/``; ``[...]`` is a
character class (``!`` negates, a leading ``]`` or ``-`` is literal, ``a-z`` is a range); an
unterminated ``[`` matches itself. Matching walks code points where the C version walks bytes, so
only ``?`` and classes against non-ASCII text can differ.
"""

from __future__ import annotations

__all__ = ["glob_match", "path_glob_match"]


def _class_match(c: str, pattern: str, start: int, end: int) -> bool:
    """Does ``c`` belong to the class ``pattern[start:end]`` (the text between ``[`` and ``]``)?"""
    i = start
    negated = False
    if pattern[i] == "!":
        negated = True
        i += 1
    # a ']' or '-' right after the opening (or after '!') is a literal member, not syntax
    if pattern[i] in "]-":
        if i < end and pattern[i] == c:
            return not negated
        i += 1
    matched = False
    while i < end:
        if i + 2 < end and pattern[i + 1] == "-" and pattern[i + 2] != "]":
            if pattern[i] <= c <= pattern[i + 2]:
                matched = True
                break
            i += 3
        else:
            if pattern[i] == c:
                matched = True
                break
            i += 1
    return matched != negated


def _match(pattern: str, text: str, pi: int, si: int, memo: dict[tuple[int, int], bool]) -> bool:
    # memoised on (pattern, text) positions: the C recursion is exponential on patterns like
    # "**a**a**a", and only wildcards recurse here, so the depth stays at the wildcard count
    key = (pi, si)
    if key in memo:
        return memo[key]
    result = _match_from(pattern, text, pi, si, memo)
    memo[key] = result
    return result


def _match_from(pattern: str, text: str, pi: int, si: int, memo: dict[tuple[int, int], bool]) -> bool:
    np, ns = len(pattern), len(text)
    while True:
        if pi == np:
            return si == ns
        c = pattern[pi]
        if pattern.startswith("**", pi):
            return any(_match(pattern, text, pi + 2, k, memo) for k in range(si, ns + 1))
        if c == "*":
            stop = text.find("/", si)
            stop = ns if stop < 0 else stop
            return any(_match(pattern, text, pi + 1, k, memo) for k in range(si, stop + 1))
        if c == "?" and si < ns and text[si] != "/":
            pi, si = pi + 1, si + 1
            continue
        if c == "[":
            class_end = pi + 1
            if class_end < np and pattern[class_end] in "]-":
                class_end += 1
            while class_end < np and pattern[class_end] != "]":
                class_end += 1
            if class_end < np:
                if si == ns or not _class_match(text[si], pattern, pi + 1, class_end):
                    return False
                pi, si = class_end + 1, si + 1
                continue
            # no closing ']': the '[' is an ordinary character
            if si < ns and text[si] == "[":
                pi, si = pi + 1, si + 1
                continue
            return False
        if si < ns and c == text[si]:
            pi, si = pi + 1, si + 1
            continue
        return False


def glob_match(pattern: str, text: str) -> bool:
    """llama.cpp ``common``'s ``glob_match(pattern, str)``: does the whole ``text`` match?"""
    return _match(pattern, text, 0, 0, {})


def path_glob_match(pattern: str, rel_path: str) -> bool:
    """The server tools' include/exclude rule for a ``/``-separated path relative to the search base.

    A pattern without ``/`` is matched against the basename, at any depth. One with ``/`` is
    matched against the whole relative path, after a ``**/`` prefix unless it already starts with
    ``**/`` or ``/`` (or is ``**``). As upstream, the prefix needs a ``/`` before the pattern, so
    ``src/*.cpp`` finds ``x/src/a.cpp`` but not a top-level ``src/a.cpp``.
    """
    if "/" not in pattern:
        return glob_match(pattern, rel_path.rsplit("/", 1)[-1])
    if pattern == "**" or pattern.startswith("**/") or pattern.startswith("/"):
        return glob_match(pattern, rel_path)
    return glob_match("**/" + pattern, rel_path)
