"""Kombu's filesystem transport (the demo's embedded broker: messages are files under
var/celery/), made safe for producers and a worker running at once.

Kombu's own `_put` creates the message file and then writes it, so a worker listing the folder in
between takes an empty file and dies on its JSON (`JSONDecodeError`); its `_get` moves a file it
takes to the temporary directory, which on another filesystem is a copy that two workers can
both make. Here a message is written under a name no queue reads (a leading dot) and renamed into
place, so it appears whole or not at all; a worker claims one by renaming it into the processed
folder on the same filesystem, which exactly one worker can do; and a file that still cannot be
read (written by an older producer, or damaged) is set aside with a log line instead of stopping
the worker. The exchange tables in the control folder are created the same way.

Selected by CELERY_BROKER_TRANSPORT in config/settings/base.py whenever the broker is the
filesystem; Redis (production) is untouched."""

from __future__ import annotations

import errno
import logging
import os
import tempfile
import uuid
from pathlib import Path
from queue import Empty
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)

UNREADABLE_SUFFIX = ".unreadable"


def _write_whole(folder: str | Path, final_name: str, data: bytes) -> Path:
    """Write `data` to a hidden file in `folder`, then rename it to `final_name`: readers see
    the whole file or none (a rename within one folder is atomic)."""
    descriptor, temporary = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        final = Path(folder) / final_name
        os.replace(temporary, final)
        return final
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        try:
            _write_whole(self.data_folder_out, name, dumps(payload).encode())
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc

    def _get(self, queue: str) -> dict[str, Any]:  # type: ignore[override]
        wanted = f"{queue}.msg"
        claimed_folder = Path(self.processed_folder)
        claimed_folder.mkdir(parents=True, exist_ok=True)
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.startswith(".") or name.partition(".")[2] != wanted:
                continue
            claimed = claimed_folder / name
            try:
                os.rename(os.path.join(self.data_folder_in, name), claimed)
            except FileNotFoundError:
                continue  # another worker took it first
            except OSError as exc:
                if exc.errno == errno.EXDEV:
                    raise ChannelError(
                        "the filesystem broker's processed_folder must be on the same filesystem "
                        "as its data folder (a message is claimed by renaming it there)"
                    ) from exc
                continue
            try:
                payload = loads(claimed.read_bytes())
            except (OSError, ValueError) as exc:
                aside = claimed.with_name(claimed.name + UNREADABLE_SUFFIX)
                claimed.rename(aside)
                logger.error(
                    "filesystem broker: message %s is unreadable (%s); set aside as %s", name, exc, aside
                )
                continue
            if not self.store_processed:
                claimed.unlink(missing_ok=True)
            return payload
        raise Empty()

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str | None, queue: str) -> None:
        # _exchange_file validates the name (and is missing from kombu's stubs).
        table = self._exchange_file(exchange)  # type: ignore[attr-defined]
        self.control_folder.mkdir(parents=True, exist_ok=True)
        if not table.exists():
            row = [[routing_key or "", pattern or "", queue or ""]]
            descriptor, temporary = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=self.control_folder)
            with os.fdopen(descriptor, "wb") as file:
                file.write(dumps(row).encode())
            try:
                # link, unlike rename, refuses to replace: of two first binders one creates the
                # table whole and the other adds its row below, under the lock.
                os.link(temporary, table)
                return
            except FileExistsError:
                pass
            finally:
                os.unlink(temporary)
        super()._queue_bind(exchange, routing_key, pattern, queue)


class Transport(filesystem.Transport):
    Channel = Channel
