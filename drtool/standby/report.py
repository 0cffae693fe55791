"""A failover's record for people: the runbook section for failover and failback (Markdown), and an HTML
report of one failover with its measured RPO and RTO (docs/standby.md)."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any


def runbook_section(backup_set: str, plugins: list[str] | None = None) -> str:
    """The failover and failback steps for ``backup_set``, as `drtool runbook --standby-set` appends them."""
    names = ", ".join(plugins or ["the set's plugins"])
    return "\n".join(
        [
            f"## Failover to the warm standby (set `{backup_set}`)",
            "",
            "The standby is hydrated from the store by "
            f"`drtool standby --set {backup_set} --target STANDBY_KUBECONFIG` "
            f'({names}); its lag is `drtool_standby_lag_seconds{{set="{backup_set}"}}` (alert '
            "`DrtoolStandbyLagging`).",
            "",
            "1. Confirm the primary is down. `drtool failover` probes its API servers and refuses while one answers.",
            "2. Stop `drtool standby` for the set (the failover runs the last round itself).",
            f"3. `drtool failover --set {backup_set} --target STANDBY_KUBECONFIG --approve [--plan PLAN] "
            "[--failed-at TIME]` with the store's passphrase (the owner key fences the set; the CronJob's key "
            "file cannot).",
            "   Add `--force` only when the primary answers but must not serve (split network, compromise).",
            "   The plan's steps of plugins the standby does not hydrate run too: the newest complete checkpoint of "
            "each training run into the standby site's object store, DNS re-pointed by a `dns-certs` step's "
            "`cutover` (set its variable to the standby's load balancer addresses first).",
            "4. Read the report: RPO (seconds, training steps), RTO to service, the steps and checks, and what is "
            "left (held deletions, DNS without a `dns-certs` step).",
            "5. Held deletions: judge them, then `drtool standby ... --delete-after 0 --once` applies them.",
            "6. Point backups at the new primary: a new set (`NEW`) with `drtool follow` on it.",
            "",
            "## Failback",
            "",
            "1. Rebuild the old site empty. Hydrate it from the new primary's set: "
            "`drtool standby --set NEW --target OLD_KUBECONFIG`; wait for the lag to settle.",
            f"2. `drtool failback --set NEW --target OLD_KUBECONFIG --lift {backup_set} --approve [--plan PLAN]`: "
            "with the application on the new primary quiesced: drains its followers, fences `NEW`, applies the last "
            "link, releases, runs the "
            f"checks, and lifts the fence of `{backup_set}` once the checks hold.",
            f"3. Resume backups of `{backup_set}` on the old site; stop the follower of `NEW`.",
            "",
        ]
    )


def html_report(result: Mapping[str, Any], kind: str = "failover") -> str:
    """One failover as a self-contained HTML page."""
    esc = html.escape
    rows = [
        ("set", result["backup_set"]),
        ("started", result["started"]),
        ("failure", result["failed_at"]),
        ("forced", "yes" if result["forced"] else "no"),
        ("primary", ", ".join(result["primary"]) or "not recorded"),
        ("reachable at the time", ", ".join(result["reachable"]) or "none"),
        ("fenced", result["fence_written"]),
        ("last change applied", result["last_change"] or "none"),
        ("RPO", "unknown" if result["rpo_s"] is None else f"{result['rpo_s']:.1f} s"),
        ("RTO (to service)", f"{result['rto_s']:.1f} s"),
        ("links applied at the end", str(len(result["caught_up"]))),
        ("released", ", ".join(f"{k}: {v}" for k, v in result["released"].items()) or "nothing"),
        ("deletions still held", str(result["still_deferred"])),
        ("plan steps restored", "; ".join(f"{s['id']}: {s['detail']}" for s in result.get("steps", [])) or "none"),
        ("training resumes from", ", ".join(f"{r} step {n}" for r, n in result.get("resume_steps", {}).items()) or "-"),
    ]
    table = "".join(f"<tr><th>{esc(k)}</th><td>{esc(str(v))}</td></tr>" for k, v in rows)
    checks = "".join(
        f"<tr><td>{esc(c['name'])}</td><td>{'ok' if c['ok'] else 'FAILED'}</td>"
        f"<td>{_seconds(c['green_s'])}</td><td>{esc(c['detail'])}</td></tr>"
        for c in result["checks"]
    )
    left = "".join(f"<li>{esc(line)}</li>" for line in result["left"]) or "<li>nothing</li>"
    verdict = "service restored" if result["ok"] else "CHECKS FAILED"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>drtool {kind}: {esc(result['backup_set'])}</title>"
        "<style>body{font-family:sans-serif;margin:2em}th{text-align:left;padding-right:1em}td{padding-right:1em}</style>"
        f"</head><body><h1>{esc(kind.capitalize())} of set {esc(result['backup_set'])}: {verdict}</h1>"
        f"<table>{table}</table><h2>Checks</h2><table><tr><th>check</th><th>result</th><th>green at</th>"
        f"<th>detail</th></tr>{checks}</table><h2>Left for the operator</h2><ul>{left}</ul>"
        f"<h2>Record</h2><pre>{esc(json.dumps(result, indent=2))}</pre></body></html>"
    )


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f} s"
