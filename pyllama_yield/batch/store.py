"""Where OpenAI's Batch API keeps its state: SQLite (the standard library's, in WAL mode) beside the
uploaded and produced files, under one data folder. Each batch line's answer is committed in the
same transaction that marks it done, so a server killed at any moment (SIGKILL included) resumes
on restart with every line answered exactly once: a line without a committed answer runs again,
one with an answer never does.

Used from one thread at a time per connection; the HTTP routes and the batch runner share one
store whose methods each take the lock and run one short transaction.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BatchRecord", "BatchStore", "FileRecord", "LineRecord", "default_data_dir"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY, filename TEXT NOT NULL, purpose TEXT NOT NULL, bytes INTEGER NOT NULL,
    created_at INTEGER NOT NULL, tenant TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY, endpoint TEXT NOT NULL, input_file_id TEXT NOT NULL, completion_window TEXT NOT NULL,
    status TEXT NOT NULL, tenant TEXT NOT NULL, metadata TEXT, output_file_id TEXT, error_file_id TEXT,
    created_at INTEGER NOT NULL, in_progress_at INTEGER, finalizing_at INTEGER, completed_at INTEGER,
    failed_at INTEGER, cancelling_at INTEGER, cancelled_at INTEGER, expires_at INTEGER NOT NULL, errors TEXT
);
CREATE TABLE IF NOT EXISTS lines (
    batch_id TEXT NOT NULL, n INTEGER NOT NULL, custom_id TEXT, request TEXT, error TEXT,
    status_code INTEGER, answer TEXT, done INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (batch_id, n)
);
"""

OPEN_STATES = ("validating", "in_progress", "finalizing", "cancelling")  # a restart resumes these


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/pyllama-yield``, else ``~/.local/share/pyllama-yield``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "pyllama-yield"


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


@dataclass(frozen=True)
class FileRecord:
    id: str
    filename: str
    purpose: str
    bytes: int
    created_at: int
    tenant: str  # who uploaded it (or whose batch made it): only they see it

    def json(self) -> dict[str, Any]:
        return {"id": self.id, "object": "file", "bytes": self.bytes, "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed"}  # fmt: skip


@dataclass(frozen=True)
class LineRecord:
    n: int  # the line's number in the input file (from 1)
    custom_id: str | None
    request: dict[str, Any] | None  # None: the line was malformed (``error`` says why)
    error: str | None
    status_code: int | None
    answer: dict[str, Any] | None
    done: bool


@dataclass(frozen=True)
class BatchRecord:
    id: str
    endpoint: str
    input_file_id: str
    completion_window: str
    status: str
    tenant: str
    metadata: dict[str, Any] | None
    output_file_id: str | None
    error_file_id: str | None
    times: dict[str, int | None]  # created_at, in_progress_at, ... as OpenAI names them
    errors: dict[str, Any] | None
    counts: dict[str, int]  # total, completed, failed

    def json(self) -> dict[str, Any]:
        return {"id": self.id, "object": "batch", "endpoint": self.endpoint, "errors": self.errors,
                "input_file_id": self.input_file_id, "completion_window": self.completion_window,
                "status": self.status, "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
                **self.times, "expired_at": None, "request_counts": self.counts,
                "metadata": self.metadata}  # fmt: skip


TIME_FIELDS = ("created_at", "in_progress_at", "finalizing_at", "completed_at", "failed_at", "cancelling_at",
               "cancelled_at", "expires_at")  # fmt: skip


class BatchStore:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.files_dir = data_dir / "files"
        self.files_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(data_dir / "batches.sqlite3", check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a committed answer survives power loss too
        self._db.executescript(SCHEMA)

    @staticmethod
    def exists(data_dir: Path) -> bool:
        return (data_dir / "batches.sqlite3").exists()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _write(self, sql: str, args: tuple[Any, ...] = ()) -> None:
        with self._lock:
            self._db.execute(sql, args)

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # --- files ------------------------------------------------------------------------------
    def add_file(self, filename: str, purpose: str, data: bytes, tenant: str, file_id: str | None = None) -> FileRecord:
        """A file kept under the data folder (``file_id``: a fixed id, written again if it exists)."""
        record = FileRecord(file_id or new_id("file-"), filename, purpose, len(data), int(time.time()), tenant)
        path = self.files_dir / record.id
        tmp = path.with_suffix(".part")
        tmp.write_bytes(data)
        os.replace(tmp, path)  # the file is whole before its row says it exists
        self._write("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?)",
                    (record.id, filename, purpose, len(data), record.created_at, tenant))  # fmt: skip
        return record

    def file(self, file_id: str, tenant: str) -> FileRecord | None:
        rows = self._rows("SELECT * FROM files WHERE id = ? AND tenant = ?", (file_id, tenant))
        return FileRecord(*rows[0]) if rows else None

    def files(self, tenant: str, purpose: str | None = None) -> list[FileRecord]:
        rows = self._rows("SELECT * FROM files WHERE tenant = ? ORDER BY created_at DESC, id", (tenant,))
        return [FileRecord(*r) for r in rows if purpose is None or r[2] == purpose]

    def file_content(self, file_id: str) -> bytes:
        return (self.files_dir / file_id).read_bytes()

    def delete_file(self, file_id: str, tenant: str) -> bool:
        if self.file(file_id, tenant) is None:
            return False
        self._write("DELETE FROM files WHERE id = ?", (file_id,))
        (self.files_dir / file_id).unlink(missing_ok=True)
        return True

    # --- batches ----------------------------------------------------------------------------
    def create_batch(
        self,
        endpoint: str,
        input_file_id: str,
        completion_window: str,
        tenant: str,
        metadata: dict[str, Any] | None,
        lines: list[LineRecord],
    ) -> str:
        """A batch and its lines, in one transaction (validated: each line a request or an error)."""
        batch_id, now = new_id("batch_"), int(time.time())
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "INSERT INTO batches (id, endpoint, input_file_id, completion_window, status, tenant, metadata,"
                    " created_at, in_progress_at, expires_at) VALUES (?, ?, ?, ?, 'in_progress', ?, ?, ?, ?, ?)",
                    (batch_id, endpoint, input_file_id, completion_window, tenant,
                     json.dumps(metadata) if metadata is not None else None, now, now, now + 24 * 3600),
                )  # fmt: skip
                db.executemany(
                    "INSERT INTO lines (batch_id, n, custom_id, request, error, done) VALUES (?, ?, ?, ?, ?, ?)",
                    [(batch_id, ln.n, ln.custom_id, json.dumps(ln.request) if ln.request is not None else None,
                      ln.error, int(ln.request is None)) for ln in lines],
                )  # fmt: skip
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return batch_id

    def batch(self, batch_id: str, tenant: str | None = None) -> BatchRecord | None:
        """A batch (``tenant``: only if it is theirs)."""
        rows = self._rows("SELECT * FROM batches WHERE id = ?", (batch_id,))
        if not rows or (tenant is not None and rows[0][5] != tenant):
            return None
        return self._record(rows[0])

    def batches(self, tenant: str, limit: int, after: str | None) -> list[BatchRecord]:
        rows = self._rows("SELECT * FROM batches WHERE tenant = ? ORDER BY created_at DESC, id DESC", (tenant,))
        ids = [r[0] for r in rows]
        start = ids.index(after) + 1 if after in ids else 0
        return [self._record(r) for r in rows[start : start + limit]]

    def open_batches(self) -> list[str]:
        marks = ",".join("?" * len(OPEN_STATES))
        return [
            r[0]
            for r in self._rows(f"SELECT id FROM batches WHERE status IN ({marks}) ORDER BY created_at", OPEN_STATES)
        ]

    def set_status(self, batch_id: str, status: str, **fields: Any) -> None:
        """The batch's status, with the time of this state (``<status>_at``) and other columns."""
        columns = {"status": status, **fields}
        at = f"{status}_at"
        if at in TIME_FIELDS:
            columns[at] = int(time.time())
        sets = ", ".join(f"{k} = ?" for k in columns)
        self._write(f"UPDATE batches SET {sets} WHERE id = ?", (*columns.values(), batch_id))

    def _record(self, row: tuple[Any, ...]) -> BatchRecord:
        (bid, endpoint, input_file_id, window, status, tenant, metadata, out_id, err_id, *rest) = row
        times = dict(zip(TIME_FIELDS[:-1], rest[:7], strict=True))
        times["expires_at"] = rest[7]
        errors = json.loads(rest[8]) if rest[8] else None
        counts = self._counts(bid)
        meta = json.loads(metadata) if metadata else None
        return BatchRecord(
            bid, endpoint, input_file_id, window, status, tenant, meta, out_id, err_id, times, errors, counts
        )

    def _counts(self, batch_id: str) -> dict[str, int]:
        [(total, completed, failed)] = self._rows(
            "SELECT COUNT(*), SUM(done AND status_code BETWEEN 200 AND 299),"
            " SUM(done AND NOT COALESCE(status_code BETWEEN 200 AND 299, 0)) FROM lines WHERE batch_id = ?",
            (batch_id,),
        )
        return {"total": total, "completed": completed or 0, "failed": failed or 0}

    # --- lines ------------------------------------------------------------------------------
    def pending_lines(self, batch_id: str) -> list[LineRecord]:
        rows = self._rows("SELECT * FROM lines WHERE batch_id = ? AND done = 0 ORDER BY n", (batch_id,))
        return [_line(r) for r in rows]

    def lines(self, batch_id: str) -> list[LineRecord]:
        return [_line(r) for r in self._rows("SELECT * FROM lines WHERE batch_id = ? ORDER BY n", (batch_id,))]

    def answer(self, batch_id: str, n: int, status_code: int, answer: dict[str, Any]) -> None:
        """A line's answer, committed with its done mark (never twice: a done line is not rewritten)."""
        self._write(
            "UPDATE lines SET status_code = ?, answer = ?, done = 1 WHERE batch_id = ? AND n = ? AND done = 0",
            (status_code, json.dumps(answer), batch_id, n),
        )


def _line(row: tuple[Any, ...]) -> LineRecord:
    _, n, custom_id, request, error, status_code, answer, done = row
    return LineRecord(n, custom_id, json.loads(request) if request else None, error, status_code,
                      json.loads(answer) if answer else None, bool(done))  # fmt: skip
