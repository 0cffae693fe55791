"""`no-reissue`: restored certificates are used, not replaced. If a Certificate comes back without a matching
Secret (or with a status cert-manager does not trust), the real cert-manager issues it again: new keys
everywhere at once, and with ACME, orders against the CA's rate limits. The check waits until every
Certificate in scope is Ready and watches for ``window`` seconds after the restore: a CertificateRequest
that cert-manager created since the restore began for a revision after the first is a re-issue, and fails
the check with the Certificate, the request and cert-manager's own reason. A request for revision 1 is a
first issuance (the Certificate had never been issued when it was backed up): reported, not failed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from typing import Literal

from pydantic import Field

from drtool.durations import Duration, format_duration
from drtool.kube.client import KubeClient
from drtool.kube.readings import Obj, conditions, in_namespaces, is_true, items, ref, restored, wait_for
from drtool.plugin.checks import CheckRun, CheckSettings, CheckWatch, NamespaceList, PlatformCheck, Verdict

CERT_MANAGER = "/apis/cert-manager.io/v1"
CERTIFICATE_NAME = "cert-manager.io/certificate-name"
REVISION = "cert-manager.io/certificate-revision"


class NoReissueCheck(CheckSettings):
    """Certificates are Ready and cert-manager re-issues none of them after the restore."""

    type: Literal["no-reissue"]
    namespaces: NamespaceList = Field(default_factory=list)
    window: Duration = dt.timedelta(seconds=30)  # watched for new CertificateRequests after the restore
    timeout: Duration = dt.timedelta(minutes=2)  # for every Certificate to be Ready

    def summary(self) -> str:
        return f"Certificates Ready, none re-issued by cert-manager within {format_duration(self.window)}"


def _path(resource: str) -> Callable[[str | None], str]:
    return lambda ns: f"{CERT_MANAGER}/namespaces/{ns}/{resource}" if ns else f"{CERT_MANAGER}/{resource}"


@dataclasses.dataclass(frozen=True)
class Issuance:
    """A CertificateRequest cert-manager created after the restore began."""

    request: str  # namespace/name
    certificate: str  # namespace/name
    revision: int
    after_s: float  # seconds after the restore began

    @property
    def reissue(self) -> bool:
        return self.revision > 1


def issuances(client: KubeClient, check: NoReissueCheck, since: dt.datetime) -> list[Issuance]:
    found = []
    for path in in_namespaces(check.namespaces, _path("certificaterequests")):
        for request in items(client, path):
            meta = request["metadata"]
            created = dt.datetime.fromisoformat(meta["creationTimestamp"].replace("Z", "+00:00"))
            if created < since or restored(request):  # older, or a restore put it back: not an issuance
                continue
            annotations = meta.get("annotations") or {}
            ns = meta["namespace"]
            certificate = f"{ns}/{annotations.get(CERTIFICATE_NAME, '?')}"
            revision = int(annotations.get(REVISION) or 0)
            found.append(Issuance(f"{ns}/{meta['name']}", certificate, revision, (created - since).total_seconds()))
    return sorted(found, key=lambda i: i.after_s)


def certificates(client: KubeClient, check: NoReissueCheck) -> list[Obj]:
    return [c for path in in_namespaces(check.namespaces, _path("certificates")) for c in items(client, path)]


class ReissueWatch:
    """Looks for re-issues since the restore began; the first one seen is the check's verdict."""

    def __init__(self, client: KubeClient, check: NoReissueCheck, since: dt.datetime) -> None:
        self.client, self.check, self.since = client, check, since
        self.verdict: Verdict | None = None

    def seen(self) -> bool:
        if self.verdict is None:
            again = [i for i in issuances(self.client, self.check, self.since) if i.reissue]
            if again:
                self.verdict = self._fail(again)
        return self.verdict is not None

    def _fail(self, again: list[Issuance]) -> Verdict:
        first = again[0]
        ns, name = first.certificate.split("/", 1)
        why = self._why_issuing(ns, name)
        more = f" (and {len(again) - 1} more)" if len(again) > 1 else ""
        detail = (
            f"cert-manager re-issued Certificate {first.certificate}: CertificateRequest {first.request} "
            f"(revision {first.revision}) {first.after_s:.0f}s after the restore began{why}{more}"
        )
        return Verdict(False, detail, {"reissued": [i.certificate for i in again]})

    def _why_issuing(self, namespace: str, name: str) -> str:
        """cert-manager's reason: the Certificate's Issuing condition while it lasts, then its latest event."""
        certificate = self.client.get(f"{CERT_MANAGER}/namespaces/{namespace}/certificates/{name}")
        issuing = conditions(certificate).get("Issuing")
        if issuing:
            return f"; cert-manager: {issuing.get('reason')}: {issuing.get('message')}"
        selector = f"involvedObject.kind=Certificate,involvedObject.name={name}"
        events = items(self.client, f"/api/v1/namespaces/{namespace}/events", {"fieldSelector": selector})
        said = [e for e in events if e.get("reason") == "Issuing"]
        why = [e for e in said if "successfully issued" not in str(e.get("message"))]  # the cause, not the outcome
        latest = max(why or said, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "", default=None)
        return f"; cert-manager: {latest.get('message')}" if latest else ""


def run(check: NoReissueCheck, ctx: CheckRun, watch: CheckWatch) -> Verdict:
    client = ctx.kube()
    since = ctx.restore_started.replace(microsecond=0)  # creationTimestamps have whole seconds
    if not certificates(client, check):
        return Verdict(False, "no Certificate found on the target")
    reissues = ReissueWatch(client, check, since)

    def all_ready() -> tuple[list[Obj] | None, str]:
        certs = certificates(client, check)
        pending = [c for c in certs if not is_true(c, "Ready")]
        if not pending or reissues.seen():  # a re-issue decides at once
            return certs, ""
        ready = conditions(pending[0]).get("Ready") or {}
        return None, f"{len(pending)} of {len(certs)} not Ready, e.g. {ref(pending[0])}: {ready.get('message', '')}"

    certs, why = wait_for(all_ready, check.timeout.total_seconds())
    if certs is None or reissues.seen():
        return reissues.verdict or Verdict(False, f"not within {format_duration(check.timeout)}: {why}")
    watch.green()
    window_end = watch.started_s + check.window.total_seconds()
    while watch.clock() < window_end:
        time.sleep(min(1.0, max(0.0, window_end - watch.clock())))
        if reissues.seen():
            return reissues.verdict  # type: ignore[return-value]
    first = [i.certificate for i in issuances(client, check, since)]
    news = f"; issued for the first time: {', '.join(first)}" if first else ""
    return Verdict(
        True,
        f"{len(certs)} Certificates Ready, none re-issued in the {format_duration(check.window)} after the restore"
        + news,
        {"certificates": len(certs), "first_issuances": first},
    )


CHECK = PlatformCheck("no-reissue", NoReissueCheck, run, reads_cluster=True)
