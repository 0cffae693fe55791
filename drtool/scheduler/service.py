"""`drtool schedule run`: APScheduler fires each backup set's trigger; the main thread runs the backups.

APScheduler 3 (BackgroundScheduler) keeps the jobs in the catalog database (SQLAlchemyJobStore), so a
restarted scheduler knows when each set was due and runs a missed one once (``coalesce``) if it is within
``misfire_grace``; a set seen for the first time runs at once. A fired job hands its set to the main
thread and waits for it to finish, so APScheduler's ``max_instances=1`` really means one run per set at a
time, and SIGTERM reaches the running backup (signals are only delivered to the main thread). One
scheduler per catalog database: APScheduler 3 job stores are not shared between processes (two machines
each use their own catalog; the store lock keeps their backups and prunes apart).
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
from typing import Any

from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy.engine import Engine

from drtool.scheduler.runner import Interrupted, RunResult, SetRunner
from drtool.scheduler.sets import BackupSet

log = logging.getLogger("drtool.scheduler")
JOBS_TABLE = "schedule_jobs"

# the process's one service: APScheduler stores jobs by reference to a module-level function
_work: queue.Queue[tuple[str, threading.Event]] = queue.Queue()
_closed = threading.Event()  # set when the main loop ends: a job fired late must not wait forever


def fire(name: str) -> None:
    """The APScheduler job: queue the set for the main thread and wait until its run ends."""
    done = threading.Event()
    _work.put((name, done))
    while not done.wait(0.5) and not _closed.is_set():
        pass


def trigger_for(bset: BackupSet) -> BaseTrigger:
    jitter = int(bset.jitter.total_seconds()) or None
    if bset.cron:  # CronTrigger.from_crontab, plus the jitter it does not take
        return CronTrigger(**_cron_fields(bset.cron), timezone=dt.UTC, jitter=jitter)
    assert bset.interval is not None
    return IntervalTrigger(seconds=bset.interval.total_seconds(), timezone=dt.UTC, jitter=jitter)


def _cron_fields(expr: str) -> dict[str, str]:
    minute, hour, day, month, day_of_week = expr.split()
    return {"minute": minute, "hour": hour, "day": day, "month": month, "day_of_week": day_of_week}


def job_store(engine: Engine) -> SQLAlchemyJobStore:
    return SQLAlchemyJobStore(engine=engine, tablename=JOBS_TABLE)


def next_runs(engine: Engine) -> dict[str, dt.datetime | None]:
    """When each stored job fires next, as the last `schedule run` left it (read without starting anything)."""
    store = job_store(engine)
    scheduler = BackgroundScheduler(jobstores={"default": store}, timezone=dt.UTC)
    store.start(scheduler, "default")
    try:
        return {job.id: job.next_run_time for job in store.get_all_jobs()}
    finally:
        store.shutdown()


class SchedulerService:
    def __init__(self, runner: SetRunner, engine: Engine) -> None:
        self.runner = runner
        self.scheduler = BackgroundScheduler(
            jobstores={"default": job_store(engine)},
            executors={"default": {"type": "threadpool", "max_workers": max(2, len(runner.sets))}},
            job_defaults={"coalesce": True, "max_instances": 1},
            timezone=dt.UTC,
        )
        self.results: list[RunResult] = []

    def _sync_jobs(self) -> None:
        """One job per configured set; removed sets lose their job; an unchanged schedule keeps its next run."""
        stored = {job.id: job for job in self.scheduler.get_jobs()}
        scheduled = {name for name, bset in self.runner.sets.items() if bset.follow is None}
        for job_id in stored.keys() - scheduled:
            self.scheduler.remove_job(job_id)
        for name, bset in self.runner.sets.items():
            if bset.follow is not None:
                continue  # its follower runs it (`drtool follow --set NAME`), not a trigger
            trigger = trigger_for(bset)
            options: dict[str, Any] = {}
            old = stored.get(name)
            if old is None:
                options["next_run_time"] = dt.datetime.now(dt.UTC)  # a new set gets its first backup at once
            elif str(old.trigger) == str(trigger) and old.next_run_time is not None:
                options["next_run_time"] = old.next_run_time  # missed while down: misfire rules decide
            self.scheduler.add_job(
                fire,
                trigger,
                args=[name],
                id=name,
                name=name,
                replace_existing=True,
                misfire_grace_time=int(bset.misfire_grace.total_seconds()),
                coalesce=True,
                max_instances=1,
                **options,
            )

    def run(self, max_runs: int | None = None) -> list[RunResult]:
        """Serve until SIGTERM/SIGINT (or ``max_runs`` runs, for tests and drills). Returns the runs made."""
        stopper = self.runner.stopper
        self.scheduler.start(paused=True)
        self._sync_jobs()
        _closed.clear()
        self.scheduler.resume()
        try:
            while not stopper.stopping and (max_runs is None or len(self.results) < max_runs):
                try:
                    name, done = _work.get(timeout=0.2)
                except queue.Empty:
                    continue
                try:
                    self.results.append(self.runner.run(name))
                except Interrupted:
                    log.warning("interrupted: the running backup was abandoned, nothing was published")
                    break
                finally:
                    done.set()
        finally:
            _closed.set()
            self.scheduler.shutdown(wait=False)
            while not _work.empty():  # runs fired but not started are dropped: the next start catches up
                _work.get_nowait()[1].set()
        return self.results
