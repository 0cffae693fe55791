"""Recovery independence: every dependency a plan's restore will need, judged against the failure domain.

For each step, its plugin's ``dependencies()`` plus the core's (the store, the key slot) are collected
through ``drtool.restore.restore_dependencies``, then each is judged:

- **inside**: the address falls in the failure domain recorded at backup time (``domain.py``), directly
  or once its name is resolved; the evidence says which part of the domain it matched and why that part
  is there;
- **independent**: it matches nothing in the domain and names something that exists without the cluster
  (an IP outside its networks, a name that resolves outside them, a local path, an offline key);
- **unknown**: it cannot be judged from here (a short name that only the cluster's DNS search path makes
  meaningful, a name that does not resolve, something that is not an address) — a person must look;
- **waived**: inside or unknown, but accepted by one of the plan's waivers (its reason is shown; a waiver
  never turns into "passed", and an expired one does not apply).

Every key slot of the store is judged too: the one that unlocked it is needed; another slot whose holder
(a Vault transit key, say) lives inside the domain is reported without failing the verdict, because that
slot is not how this store gets opened.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fnmatch
import socket
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from drtool.crypto.slots import KeySlot
from drtool.independence.domain import Address, DomainMatch, FailureDomain, parse_address
from drtool.independence.hints import fix_hint
from drtool.independence.marks import BLOCKS_RESTORE, PROVISIONER
from drtool.plans.schema import Plan, Waiver
from drtool.plans.steps import step_target, why_not_run
from drtool.plugin.contract import Plugin
from drtool.plugin.manager import load_plugins
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.restore import restore_dependencies

INSIDE, INDEPENDENT, UNKNOWN, WAIVED = "inside", "independent", "unknown", "waived"
RESOLVE_TIMEOUT_S = 3.0
RESOLVE_WORKERS = 16
# Provisioners whose volumes live on the cluster's own nodes (they die with it) or in a cloud's disks (they don't).
NODE_LOCAL_PROVISIONERS = (
    "kubernetes.io/no-provisioner",
    "rancher.io/local-path",
    "openebs.io/local",
    "*.rbd.csi.ceph.com",
    "*.cephfs.csi.ceph.com",
    "driver.longhorn.io",
    "topolvm.io",
    "hostpath.csi.k8s.io",
    "k8s.io/minikube-hostpath",
)
CLOUD_PROVISIONERS = (
    "pd.csi.storage.gke.io",
    "filestore.csi.storage.gke.io",
    "ebs.csi.aws.com",
    "efs.csi.aws.com",
    "fsx.csi.aws.com",
    "disk.csi.azure.com",
    "file.csi.azure.com",
    "kubernetes.io/gce-pd",
    "kubernetes.io/aws-ebs",
    "kubernetes.io/azure-disk",
)
OFFLINE_SLOTS = {
    "passphrase": "a passphrase held by operators, not by the cluster",
    "keyfile": "a key file read from DRTOOL_KEYFILE on the machine running the restore",
    "recovery": "recovery shares printed and kept offline",
}


@dataclasses.dataclass
class Finding:
    """One dependency, judged."""

    kind: str  # endpoint | reference | credential
    address: str
    purpose: str
    evidence: str  # which object and field carries it (from the plugin)
    status: str = UNKNOWN
    detail: str = ""  # why: which address matched which part of the domain
    hint: str = ""
    steps: list[str] = dataclasses.field(default_factory=list)
    match: DomainMatch | None = None
    waiver: Waiver | None = None
    needed: bool = True
    blocks_restore: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "address": self.address,
            "purpose": self.purpose.removeprefix(BLOCKS_RESTORE),
            "evidence": self.evidence,
            "status": self.status,
            "detail": self.detail,
            "hint": self.hint,
            "steps": self.steps,
            "match": self.match.to_dict() if self.match else None,
            "waiver": _waiver_dict(self.waiver) if self.waiver else None,
            "needed": self.needed,
            "blocks_restore": self.blocks_restore,
        }


@dataclasses.dataclass
class IndependenceReport:
    plan: str
    backup_id: str
    backup_created: str
    domain: FailureDomain
    findings: list[Finding]
    steps: list[dict[str, Any]]  # id, uses, needs, analysed, note
    waivers: list[dict[str, Any]]
    generated: str

    @property
    def failing(self) -> list[Finding]:
        """Needed, inside the failure domain, and not waived: what makes the verdict ``fail``."""
        return [f for f in self.findings if f.needed and f.status == INSIDE]

    @property
    def verdict(self) -> str:
        """``fail`` > ``unknown`` > ``waived`` > ``pass``: the worst needed finding decides."""
        needed = {f.status for f in self.findings if f.needed}
        if INSIDE in needed:
            return "fail"
        for status in (UNKNOWN, WAIVED):
            if status in needed:
                return status
        return "pass"

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in (INSIDE, UNKNOWN, WAIVED, INDEPENDENT)}
        for f in self.findings:
            out[f.status] += 1
        out["blocking"] = sum(1 for f in self.failing if f.blocks_restore)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "plan": self.plan,
            "backup": {"id": self.backup_id, "created": self.backup_created},
            "generated": self.generated,
            "counts": self.counts(),
            "domain": self.domain.to_dict(),
            "steps": self.steps,
            "findings": [f.to_dict() for f in self.findings],
            "waivers": self.waivers,
        }


def analyze(
    plan: Plan,
    repo: Repository,
    manifest: Manifest,
    targets: Mapping[str, Mapping[str, Any]],
    *,
    today: dt.date | None = None,
    resolve: bool = True,
) -> IndependenceReport:
    """Judge every dependency of ``plan`` restoring the backup of ``manifest``; ``targets`` maps step id ->
    target mapping (default: the plan's, ``step_target``)."""
    domain = FailureDomain.from_manifest(manifest)
    plugins = load_plugins()
    steps: list[dict[str, Any]] = []
    work: list[tuple[str, Plugin, Mapping[str, Any]]] = []
    for step in plan.steps:
        note = why_not_run(step, manifest, plugins)
        analysed = {"id": step.id, "uses": step.uses, "needs": step.needs, "analysed": note is None}
        steps.append({**analysed, "note": f"skipped: {note}" if note else ""})
        if note is None:
            target = targets[step.id] if step.id in targets else step_target(plan, step)
            work.append((step.id, plugins[step.uses], target))
    # each step streams its plugin's artifacts from the store: in parallel, as the restore itself would
    with ThreadPoolExecutor(max_workers=plan.parallelism, thread_name_prefix="drtool-deps") as pool:
        per_step = list(pool.map(lambda w: restore_dependencies(repo, w[1], manifest, w[2]), work))
    findings: dict[tuple[str, str, str, str], Finding] = {}
    for (step_id, _, _), deps in zip(work, per_step, strict=True):
        for dep in deps:
            key = (dep.kind, dep.address, dep.purpose, dep.evidence)
            found = findings.setdefault(key, Finding(dep.kind, dep.address, dep.purpose, dep.evidence))
            found.steps.append(step_id)
    judged = list(findings.values()) + _other_slots(repo)
    _judge_all(judged, domain, repo, resolve)
    waivers = _apply_waivers(judged, plan.waivers, today or dt.date.today())
    for f in judged:
        f.hint = fix_hint(f.kind, f.address, f.purpose, f.status)
    order = {INSIDE: 0, UNKNOWN: 1, WAIVED: 2, INDEPENDENT: 3}
    judged.sort(key=lambda f: (not f.needed, order[f.status], not f.blocks_restore, f.address))
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return IndependenceReport(plan.name, manifest.id, manifest.finished, domain, judged, steps, waivers, now)


# --- judging ------------------------------------------------------------------------------------------


def _judge_all(findings: list[Finding], domain: FailureDomain, repo: Repository, resolve: bool) -> None:
    names: dict[str, Address] = {}
    for f in findings:
        f.blocks_restore = f.purpose.startswith(BLOCKS_RESTORE)
        f.status, f.detail, f.match = _judge(f, domain, repo)
        judged_by_name = f.status == INDEPENDENT and f.kind != "credential" and not f.address.startswith(PROVISIONER)
        address = parse_address(f.address) if judged_by_name else None
        if address is not None and address.ip is None and "." in address.host and not address.loopback:
            names[f.address] = address
    if not names:
        return
    resolved = resolve_names({a.host for a in names.values()}) if resolve else {}
    for f in findings:
        if f.address in names:
            f.status, f.detail, f.match = _judge_resolved(f.address, names[f.address], resolved, domain)


def _judge(f: Finding, domain: FailureDomain, repo: Repository) -> tuple[str, str, DomainMatch | None]:
    """First pass, without DNS: the domain, then what the address's shape alone tells."""
    if f.address.startswith(PROVISIONER):
        return _judge_provisioner(f.address.removeprefix(PROVISIONER))
    if f.kind == "credential" and f.address.startswith("key slot "):
        return _judge_slot(_slot_by_id(repo, f.address), domain)
    found = domain.match(f.address)
    if found:
        return INSIDE, found.describe(f.address), found
    if f.address.startswith(("/", "file://")):
        return INDEPENDENT, "a local path on the machine running the restore", None
    address = parse_address(f.address)
    if address is None:
        return UNKNOWN, "not a network address: it cannot be held against the failure domain", None
    if address.loopback:
        return INDEPENDENT, f"{address} is on the machine running the restore, not a failure-domain endpoint", None
    if address.ip is not None:
        return INDEPENDENT, f"{address.host} is in none of the failure domain's networks or hosts", None
    if "." not in address.host:
        why = "a short name: the cluster's DNS search path would make it an in-cluster Service; from elsewhere"
        return UNKNOWN, f"{address.host} is {why} it resolves to whatever that host's search path says", None
    return INDEPENDENT, f"{address.host} matches no host, endpoint or DNS domain of the failure domain", None


def _judge_resolved(
    text: str, address: Address, resolved: Mapping[str, list[str] | None], domain: FailureDomain
) -> tuple[str, str, DomainMatch | None]:
    if address.host not in resolved:  # resolution switched off: the name alone decided
        return INDEPENDENT, f"{address.host} matches no host, endpoint or DNS domain of the failure domain", None
    ips = resolved[address.host]
    if not ips:
        return UNKNOWN, f"{address.host} does not resolve from here, so where it lives cannot be told", None
    for ip in ips:
        found = domain.match_address(Address(ip, address.port))
        if found:
            return INSIDE, f"{address.host} resolves to {ip}; " + found.describe(ip), found
    return INDEPENDENT, f"{address.host} resolves to {', '.join(ips)}, outside the failure domain", None


def _judge_provisioner(name: str) -> tuple[str, str, DomainMatch | None]:
    if any(fnmatch.fnmatchcase(name, p) for p in NODE_LOCAL_PROVISIONERS):
        return INSIDE, f"{name} keeps volumes on the cluster's own nodes: they are lost with it", None
    if name in CLOUD_PROVISIONERS:
        return INDEPENDENT, f"{name} keeps volumes in the cloud provider's disks, outside the cluster", None
    return UNKNOWN, f"where {name} keeps its volumes is not known to drtool", None


def _slot_by_id(repo: Repository, text: str) -> KeySlot | None:
    slot_id = text.removeprefix("key slot ").split(" ", 1)[0]
    return next((s for s in Repository.key_slots(repo.backend) if s.id == slot_id), None)


def slot_holder(slot: KeySlot) -> str | None:
    """The network address holding a slot's wrapping key (a Vault transit slot records ``address``)."""
    holder = slot.kdf.get("address")
    return str(holder) if holder else None


def _judge_slot(slot: KeySlot | None, domain: FailureDomain) -> tuple[str, str, DomainMatch | None]:
    if slot is None:
        return UNKNOWN, "the key slot is no longer in the store", None
    holder = slot_holder(slot)
    if holder:
        found = domain.match(holder)
        if found:
            return INSIDE, f"key slot {slot.id} is held by {holder}; " + found.describe(holder), found
        return INDEPENDENT, f"key slot {slot.id} is held by {holder}, outside the failure domain", None
    if slot.kind in OFFLINE_SLOTS:
        return INDEPENDENT, f"key slot {slot.id}: {OFFLINE_SLOTS[slot.kind]}", None
    return UNKNOWN, f"key slot {slot.id} of kind {slot.kind} names no holder drtool can judge", None


def _other_slots(repo: Repository) -> list[Finding]:
    """Slots other than the one that opened the store, when a network service holds them."""
    used = repo.unlocked_with.id if repo.unlocked_with else None
    out = []
    for slot in Repository.key_slots(repo.backend):
        holder = slot_holder(slot)
        if slot.id != used and holder:
            purpose = "another key slot of the store (not the one this restore opens it with)"
            evidence = f"slot label {slot.label!r}, holder {holder}"
            out.append(Finding("credential", f"key slot {slot.id} ({slot.kind})", purpose, evidence, needed=False))
    return out


def resolve_names(hosts: Iterable[str], timeout: float = RESOLVE_TIMEOUT_S) -> dict[str, list[str] | None]:
    """Each host's addresses (``None``: does not resolve), looked up in parallel within ``timeout`` overall."""
    hosts = sorted(set(hosts))
    pool = ThreadPoolExecutor(max_workers=min(RESOLVE_WORKERS, len(hosts) or 1), thread_name_prefix="drtool-dns")
    futures = {host: pool.submit(_lookup, host) for host in hosts}
    wait(futures.values(), timeout=timeout)
    pool.shutdown(wait=False, cancel_futures=True)  # a resolver that hangs must not hold the report
    return {host: (fut.result() if fut.done() else None) for host, fut in futures.items()}


def _lookup(host: str) -> list[str] | None:
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    return sorted({str(parse_address(str(info[4][0])) or info[4][0]) for info in infos})


# --- waivers ------------------------------------------------------------------------------------------


def _apply_waivers(findings: list[Finding], waivers: list[Waiver], today: dt.date) -> list[dict[str, Any]]:
    """Mark findings (inside or unknown) that a live waiver accepts; return each waiver with its use."""
    used = [0] * len(waivers)
    for f in findings:
        if f.status not in (INSIDE, UNKNOWN):
            continue
        for i, w in enumerate(waivers):
            live = w.expires is None or w.expires >= today
            if live and fnmatch.fnmatchcase(f.address, w.match) and (w.step is None or w.step in f.steps):
                f.status, f.waiver = WAIVED, w
                used[i] += 1
                break
    return [
        {**_waiver_dict(w), "expired": w.expires is not None and w.expires < today, "used": n}
        for w, n in zip(waivers, used, strict=True)
    ]


def _waiver_dict(w: Waiver) -> dict[str, Any]:
    return {
        "match": w.match,
        "reason": w.reason,
        "step": w.step,
        "expires": w.expires.isoformat() if w.expires else None,
    }
