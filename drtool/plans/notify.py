"""Webhook notifications of a plan run: a generic JSON POST at the moments a person should hear about.

Events: ``run.started``, ``approval.needed``, ``step.failed``, ``run.finished``, each with the RTO spent so far
(from the start of the first run a resume continues). The payload (docs/plans.md) is one JSON object that
any receiver can read; its ``text`` is a sentence for chat tools (Slack's incoming webhooks show it as it
is), and PagerDuty-style receivers map ``event``/``severity`` through their own adapters. It carries ids
and statuses only — never an error text (it may quote a target path or a variable's value), a target, an
option, a variable's value or the webhook URL itself: whoever reads the channel learns that step ``dns``
failed, and reads why in ``drtool runs show``.

The URL is the operator's, never the plan author's alone: ``DRTOOL_WEBHOOK`` (the operator's environment),
else the plan's ``notify.webhook`` only when ``DRTOOL_WEBHOOK_ALLOW`` (the operator's, comma-separated URL
prefixes) lists it. A plan otherwise chooses where drtool POSTs from inside the network it recovers (a blind
SSRF): such a plan runs without notifications, and says so.

Delivery never holds a recovery up: events go out in order from one background thread, each POST bounded
by a short timeout and retried twice; one that still fails is logged (without the URL) and dropped.
``close`` waits a little for what is queued.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from drtool.durations import format_duration
from drtool.errors import UsageError
from drtool.plans.results import FAILED, OK, RunResult, StepResult
from drtool.plans.schema import Plan
from drtool.repo.manifest import utc_now

PAYLOAD_VERSION = 1
ENV = "DRTOOL_WEBHOOK"  # overrides the plan's notify.webhook (an environment variable: a URL may hold a token)
ALLOW_ENV = "DRTOOL_WEBHOOK_ALLOW"  # URL prefixes a plan's notify.webhook may name, comma-separated
EVENTS = ("run.started", "approval.needed", "step.failed", "run.finished")
TIMEOUT_S = 5.0
ATTEMPTS = 3
log = logging.getLogger(__name__)


def payload(name: str, run: RunResult, step: StepResult | None, rto_so_far_s: float, kind: str) -> dict[str, Any]:
    """The documented JSON body of one event (docs/plans.md, "Notifications")."""
    objective = run.plan.objectives.rto.total_seconds() if run.plan.objectives.rto else None
    body: dict[str, Any] = {
        "version": PAYLOAD_VERSION,
        "event": name,
        "at": utc_now(),
        "severity": _severity(name, run),
        "run": {
            "id": run.run_id,
            "kind": kind,
            "plan": run.plan.name,
            "backup": run.backup_id,
            "resumed_from": run.resumed_from or None,
            "host": socket.gethostname(),
        },
        "rto": {"so_far_s": round(rto_so_far_s, 3), "objective_s": objective},
    }
    if step is not None:
        body["step"] = {"id": step.id, "uses": step.uses, "status": step.status, "attempts": step.attempts}
    if name == "run.finished":
        body["status"] = run.status
        body["steps"] = {s.id: s.status for s in run.steps.values()}
    if name == "approval.needed" or (name == "run.finished" and run.status != OK):
        body["continue_with"] = run.resume_command() if name == "run.finished" else _approve(run, step)
    body["text"] = _sentence(body, run, step)
    return body


def _severity(name: str, run: RunResult) -> str:
    if name == "step.failed" or (name == "run.finished" and run.status == FAILED):
        return "error"
    return "warning" if name == "approval.needed" or (name == "run.finished" and run.status != OK) else "info"


def _approve(run: RunResult, step: StepResult | None) -> str:
    return f"drtool restore --resume {run.run_id} --approve {step.id if step else 'STEP'}"


def _sentence(body: dict[str, Any], run: RunResult, step: StepResult | None) -> str:
    rto = format_duration(body["rto"]["so_far_s"])
    if body["rto"]["objective_s"] is not None:
        rto += f" of {format_duration(body['rto']['objective_s'])}"
    where = f"drtool {body['run']['kind']} {run.run_id} (plan {run.plan.name})"
    what = {
        "run.started": "started",
        "approval.needed": f"step {step.id if step else '?'} needs approval",
        "step.failed": f"step {step.id if step else '?'} failed (`drtool runs show {run.run_id}` says why)",
        "run.finished": f"finished: {body.get('status')}",
    }[body["event"]]
    return f"{where} {what}; RTO so far {rto}"


class Webhook:
    """Posts each event to one URL, in order, from a background thread (``RunNotifier`` for the executor)."""

    def __init__(self, url: str, *, kind: str = "restore") -> None:
        if not url.startswith(("http://", "https://")):
            raise UsageError("the webhook must be an http:// or https:// URL", "check notify.webhook or DRTOOL_WEBHOOK")
        self._url = url
        self.kind = kind
        self.delivered = 0
        self.failed = 0
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._deliver, name="webhook", daemon=True)
        self._thread.start()

    def event(self, name: str, run: RunResult, step: StepResult | None, rto_so_far_s: float) -> None:
        self._queue.put(payload(name, run, step, rto_so_far_s, self.kind))

    def close(self, wait_s: float = 2 * TIMEOUT_S) -> None:
        """Let queued events go out (waiting at most ``wait_s``), then stop."""
        self._queue.put(None)
        self._thread.join(wait_s)

    def _deliver(self) -> None:
        while (body := self._queue.get()) is not None:
            data = json.dumps(body).encode()
            for attempt in range(1, ATTEMPTS + 1):
                request = urllib.request.Request(
                    self._url, data=data, method="POST", headers={"Content-Type": "application/json"}
                )
                try:
                    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                        response.read()
                    self.delivered += 1
                    break
                except (OSError, ValueError) as exc:
                    if attempt == ATTEMPTS:
                        self.failed += 1
                        log.warning("webhook: %s not delivered: %s", body["event"], type(exc).__name__)
                    else:
                        time.sleep(0.5 * attempt)


def webhook_url(plan: Plan, environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """The URL events go to (``DRTOOL_WEBHOOK``, else the plan's when the operator allows it), and why the
    plan's is not used (None when there is nothing to say)."""
    environ = os.environ if environ is None else environ
    if environ.get(ENV):
        return environ[ENV], None
    url = plan.notify.webhook
    if not url or "${" in url:
        return None, None
    allowed = [p.strip() for p in environ.get(ALLOW_ENV, "").split(",") if p.strip()]
    if any(_under(url, prefix) for prefix in allowed):
        return url, None
    return None, f"notify.webhook is not listed in {ALLOW_ENV}: this run sends no notifications"


def _under(url: str, prefix: str) -> bool:
    """``url`` is ``prefix`` or below it, compared by parts (``https://hooks.example`` does not allow
    ``https://hooks.example.attacker.net``, nor ``https://hooks.example@attacker.net``)."""
    got, want = urllib.parse.urlsplit(url), urllib.parse.urlsplit(prefix)
    if (got.scheme, got.netloc.lower()) != (want.scheme, want.netloc.lower()) or "@" in got.netloc:
        return False
    base = want.path.rstrip("/")
    return got.path == base or got.path.startswith(base + "/") or not base


def webhook_for(plan: Plan, kind: str, warn: Callable[[str], None] = log.warning) -> Webhook | None:
    """The run's webhook (``webhook_url``); None when there is none. A plan whose webhook variable is unset,
    or whose webhook the operator did not allow, runs without notifications (``warn`` says the latter): a
    missing notification must not stop a recovery."""
    url, why_not = webhook_url(plan)
    if why_not:
        warn(why_not)
    return Webhook(url, kind=kind) if url else None
