"""API keys: ``--api-key`` (comma-separated) and ``--api-key-file`` (llama-server's: one key per
line, ``#`` starts a comment). A line of the file may go on, after whitespace, with what the key's
requests get when many users share the server: ``name=`` (the tenant fair share counts by; the
default is ``key-N``, the key's place among all keys given), ``weight=`` (its share of the slots against other tenants',
default 1), ``priority=`` (its requests' default and the most urgent they may ask for; lower is
sooner, default 0), ``max_in_flight=`` (its requests running or waiting at once) and ``tpm=`` (its
completions' prompt and generated tokens per minute); 0 = no limit.
llama-server reads such a line as one key with spaces, so a file that uses these is ours alone."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ApiKey", "KeyRing", "parse_key_line"]


@dataclass(frozen=True)
class ApiKey:
    key: str
    tenant: str
    weight: float = 1.0
    priority: int = 0
    max_in_flight: int = 0
    tpm: int = 0


def parse_key_line(line: str, n: int, default_name: str) -> ApiKey:
    """One key of the file (``n``: its line number, for errors)."""
    key, *fields = line.split()
    values: dict[str, str] = {}
    for item in fields:
        name, sep, value = item.partition("=")
        if not sep or name not in ("name", "weight", "priority", "max_in_flight", "tpm") or not value:
            raise ValueError(
                f"--api-key-file line {n}: expected name=, weight=, priority=, max_in_flight= or tpm=, got {item!r}"
            )
        values[name] = value
    try:
        weight = float(values.get("weight", 1.0))
        priority = int(values.get("priority", 0))
        max_in_flight = int(values.get("max_in_flight", 0))
        tpm = int(values.get("tpm", 0))
    except ValueError as exc:
        raise ValueError(f"--api-key-file line {n}: {exc}") from None
    if not weight > 0 or max_in_flight < 0 or tpm < 0:
        raise ValueError(f"--api-key-file line {n}: weight must be > 0, max_in_flight and tpm >= 0")
    return ApiKey(key, values.get("name", default_name), weight, priority, max_in_flight, tpm)


class KeyRing:
    """The keys a server accepts (none: every request passes, with no tenant of its key)."""

    def __init__(self, keys: list[ApiKey]) -> None:
        self.keys = {k.key: k for k in keys}
        # what the server's own requests to itself carry (the batch runner's): never written anywhere
        self.internal = secrets.token_hex(32)

    @classmethod
    def load(cls, inline: str | None, path: str | None) -> KeyRing:
        keys = [ApiKey(k, f"key-{i}") for i, k in enumerate([k for k in (inline or "").split(",") if k], 1)]
        if path:
            try:
                lines = Path(path).read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise ValueError(f"--api-key-file: cannot read {path}: {exc.strerror}") from None
            for n, line in enumerate(lines, 1):
                if line.strip() and not line.startswith("#"):
                    keys.append(parse_key_line(line, n, f"key-{len(keys) + 1}"))
        return cls(keys)

    def __bool__(self) -> bool:
        return bool(self.keys)

    def match(self, given: str) -> ApiKey | None:
        return self.keys.get(given)

    def weight(self, tenant: str) -> float:
        """A tenant's weight: its key's (the largest, if keys share a name), else 1."""
        return max((k.weight for k in self.keys.values() if k.tenant == tenant), default=1.0)
