"""Progress reporting that the library calls and the CLI renders: bars on a terminal (rich), plain lines in a
log or a pipe where a person still follows a long run (`drtool demo`), or nothing (tests, cron)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol


class Task(Protocol):
    def advance(self, n: int = 1) -> None: ...

    def done(self) -> None: ...


class Progress(Protocol):
    def task(self, description: str, total: int | None = None) -> Task: ...


class Stages(Progress, Protocol):
    """Progress that also shows which stage of a long story runs, and for how long (`drtool demo`)."""

    def stage(self, name: str) -> contextlib.AbstractContextManager[None]: ...


def elapsed(seconds: float) -> str:
    """``42s`` or ``3m07s``: how long something has run, as a person reads it."""
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


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

    def stage(self, name: str) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


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
            *(_not_for_stages(c) for c in (BarColumn(), DownloadColumn(), TransferSpeedColumn())),
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

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """A line without a bar for the stage, its time running, hidden when the stage ends (not removed: a
        task's id is its place in the list, which ``done`` relies on)."""
        with self._lock:
            task_id = self._progress.add_task(name, total=None, stage=True)
        try:
            yield
        finally:
            self._progress.update(task_id, visible=False)


def _not_for_stages(column: Any) -> Any:
    """``column`` for tasks, blank on a stage's line (a stage has no size: only its name and time)."""
    from rich.progress import ProgressColumn
    from rich.progress import Task as RichTask
    from rich.text import Text

    class Column(ProgressColumn):
        def render(self, task: RichTask) -> Any:
            return Text("") if task.fields.get("stage") else column.render(task)

    return Column()


class _LineTask:
    def __init__(self, description: str, total: int | None, tasks: list[_LineTask]) -> None:
        self.description, self.total, self.completed = description, total, 0
        self._tasks = tasks

    def advance(self, n: int = 1) -> None:
        self.completed += n

    def done(self) -> None:
        if self in self._tasks:
            self._tasks.remove(self)

    @property
    def finished(self) -> bool:
        """All of a known total done (a plugin need not say ``done()`` as well)."""
        return bool(self.total) and self.completed >= self.total  # type: ignore[operator]

    def describe(self) -> str:
        if self.total:
            return f"{self.description} {min(100, 100 * self.completed // self.total)}%"
        return f"{self.description} {self.completed}" if self.completed else self.description


class LineProgress:
    """Plain lines for a log or a pipe: every ``every`` seconds one line says which stage runs, for how long,
    and how far each running task got. Nothing is printed while nothing runs longer than that."""

    def __init__(self, echo: Callable[[str], None], every: float = 15.0) -> None:
        self.echo, self.every = echo, every
        self._tasks: list[_LineTask] = []
        self._stage: tuple[str, float] | None = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> LineProgress:
        self._ticker = threading.Thread(target=self._tick, name="drtool-progress-lines", daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()

    def task(self, description: str, total: int | None = None) -> Task:
        task = _LineTask(description, total, self._tasks)
        self._tasks.append(task)
        return task

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self._stage = (name, time.monotonic())
        try:
            yield
        finally:
            self._stage = None
            self._tasks.clear()  # a task whose plugin never said done ends with its stage

    def line(self) -> str | None:
        """What the next tick prints (None when no stage runs)."""
        if self._stage is None:
            return None
        name, started = self._stage
        running = "; ".join(t.describe() for t in list(self._tasks) if not t.finished)
        return f"  … {name}: {elapsed(time.monotonic() - started)}" + (f"; {running}" if running else "")

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            line = self.line()
            if line:
                self.echo(line)
