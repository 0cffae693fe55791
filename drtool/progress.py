"""Progress reporting that the library calls and the CLI renders (rich), or nobody renders (tests, cron)."""

from __future__ import annotations

import threading
from typing import Any, Protocol


class Task(Protocol):
    def advance(self, n: int = 1) -> None: ...

    def done(self) -> None: ...


class Progress(Protocol):
    def task(self, description: str, total: int | None = None) -> Task: ...


class _NullTask:
    def advance(self, n: int = 1) -> None:
        pass

    def done(self) -> None:
        pass


class NullProgress:
    def __enter__(self) -> NullProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def task(self, description: str, total: int | None = None) -> Task:
        return _NullTask()


class RichProgress:
    """Bars on stderr, shared by every worker thread; used by the CLI as a context manager."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TransferSpeedColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._lock = threading.Lock()

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.stop()

    def task(self, description: str, total: int | None = None) -> Task:
        with self._lock:
            task_id = self._progress.add_task(description, total=total)
        progress = self._progress

        class _Task:
            def advance(self, n: int = 1) -> None:
                progress.advance(task_id, n)

            def done(self) -> None:
                progress.update(task_id, completed=progress.tasks[task_id].total or 0, visible=False)

        return _Task()
