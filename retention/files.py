"""The archive files: gzip'd JSON lines, one line per row, written atomically and read back.

Each line is `{"run": "<run id>", "kind": "run" | "intent" | "event" | "audit", "row": {...}}`,
the row as PostgreSQL's `row_to_json` gives it (every column, under its column name). A file
is written beside its final name and renamed into place after an fsync, so a reader never
sees a half-written archive under a name an Archive row records."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.conf import settings

KINDS = ("run", "intent", "event", "audit")
CHUNK = 1 << 20


def archive_path(file_name: str) -> Path:
    return Path(settings.SEAM_ARCHIVE_DIR) / file_name


@dataclass
class FileContents:
    """What an archive file holds, counted: lines per run and kind, and its audit rows."""

    per_run: dict[str, Counter[str]] = field(default_factory=dict)
    audit_rows: list[dict[str, Any]] = field(default_factory=list)

    def count(self, run_id: str, kind: str) -> None:
        self.per_run.setdefault(run_id, Counter())[kind] += 1

    def total(self, kind: str) -> int:
        return sum(lines[kind] for lines in self.per_run.values())


@dataclass(frozen=True)
class FileWritten:
    sha256: str
    bytes: int
    contents: FileContents


class _HashingWriter:
    """A file object that hashes and counts every byte on its way to `raw`."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()


def line_of(run_id: str, kind: str, row_json: str) -> str:
    """One line; `row_json` is PostgreSQL's text of the row, kept as it came."""
    return f'{{"run":{json.dumps(run_id)},"kind":"{kind}","row":{row_json}}}'


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def archive_file_write(file_name: str, lines: Iterable[tuple[str, str, str]]) -> FileWritten:
    """Write (run id, kind, row JSON) lines to the archive store under `file_name`, durably:
    into a temporary file beside it, fsync'd, renamed into place, the directory fsync'd."""
    final = archive_path(file_name)
    final.parent.mkdir(parents=True, exist_ok=True)
    temporary = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    contents = FileContents()
    try:
        with open(temporary, "xb") as raw:
            hashing = _HashingWriter(raw)
            with gzip.GzipFile(fileobj=hashing, mode="wb", mtime=0) as zipped:
                for run_id, kind, row_json in lines:
                    zipped.write(line_of(run_id, kind, row_json).encode() + b"\n")
                    contents.count(run_id, kind)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temporary, final)
    finally:
        temporary.unlink(missing_ok=True)
    _fsync_directory(final.parent)
    return FileWritten(hashing.digest.hexdigest(), hashing.size, contents)


def file_digest(path: Path) -> tuple[str, int]:
    """The SHA-256 and size of the file as it lies on disk."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as raw:
        while chunk := raw.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def archive_lines(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as zipped:
        for line in zipped:
            yield json.loads(line)


def archive_file_read(path: Path) -> FileContents:
    """Every line of the file, counted per run and kind, with its audit rows. Raises OSError,
    EOFError, gzip.BadGzipFile or ValueError for a file that is not a whole archive."""
    contents = FileContents()
    for line in archive_lines(path):
        if line.get("kind") not in KINDS or not isinstance(line.get("row"), dict):
            raise ValueError(f"a line that is no archived row: {str(line)[:200]}")
        contents.count(str(line["run"]), line["kind"])
        if line["kind"] == "audit":
            contents.audit_rows.append(line["row"])
    return contents
