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
from drtool.independence.finder import ClusterNames, Scan, ServiceKey, find_references
from drtool.independence.hints import fix_hint
from drtool.independence.remedies import CUTOVER_PURPOSE, IMAGE_REGISTRY, Remedies, Remedy, cutover_record_name
from drtool.plans.schema import Plan, Waiver
from drtool.plans.steps import step_target, why_not_run
from drtool.plugin.contract import Plugin
from drtool.plugin.manager import load_plugins
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.restore import restore_dependencies

INSIDE, INDEPENDENT, UNKNOWN, WAIVED, REMEDIATED = "inside", "independent", "unknown", "waived", "remediated"
NOT_ADDRESSES = ("credential", "provisioner")  # dependency kinds whose address names a holder, not a host
FINDER = "finder"  # found_by for what the reference finder found (plugins are named by their own name)
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
    found_by: list[str] = dataclasses.field(default_factory=list)  # plugin names and/or "finder"
    remedy: Remedy | None = None
    service: ServiceKey | None = None  # the cluster Service a finder reference names
    field_kinds: list[str] = dataclasses.field(default_factory=list)  # where the finder found it

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "address": self.address,
            "purpose": self.purpose,
            "evidence": self.evidence,
            "status": self.status,
            "detail": self.detail,
            "hint": self.hint,
            "steps": self.steps,
            "match": self.match.to_dict() if self.match else None,
            "waiver": _waiver_dict(self.waiver) if self.waiver else None,
            "needed": self.needed,
            "blocks_restore": self.blocks_restore,
            "found_by": self.found_by,
            "field_kinds": self.field_kinds,
            "remedy": self.remedy.to_dict() if self.remedy else None,
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
    finder: dict[str, Any] = dataclasses.field(default_factory=dict)  # what the reference finder searched

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
        out = {s: 0 for s in (INSIDE, UNKNOWN, WAIVED, REMEDIATED, INDEPENDENT)}
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
            "finder": self.finder,
        }


def analyze(
    plan: Plan,
    repo: Repository,
    manifest: Manifest,
    targets: Mapping[str, Mapping[str, Any]],
    *,
    today: dt.date | None = None,
    resolve: bool = True,
    left_out: Mapping[str, str] | None = None,
) -> IndependenceReport:
    """Judge every dependency of ``plan`` restoring the backup of ``manifest``; ``targets`` maps step id ->
    target mapping (default: the plan's, ``step_target``). Steps of ``left_out`` plugins are not analysed."""
    domain = FailureDomain.from_manifest(manifest)
    plugins = load_plugins()
    steps: list[dict[str, Any]] = []
    work: list[tuple[str, Plugin, Mapping[str, Any]]] = []
    for step in plan.steps:
        note = why_not_run(step, manifest, plugins, left_out)
        analysed = {"id": step.id, "uses": step.uses, "needs": step.needs, "analysed": note is None}
        steps.append({**analysed, "note": f"skipped: {note}" if note else ""})
        if note is None:
            target = targets[step.id] if step.id in targets else step_target(plan, step)
            work.append((step.id, plugins[step.uses], target))
    # each step streams its plugin's artifacts from the store: in parallel, as the restore itself would
    with ThreadPoolExecutor(max_workers=plan.parallelism, thread_name_prefix="drtool-deps") as pool:
        per_step = list(pool.map(lambda w: restore_dependencies(repo, w[1], manifest, w[2]), work))
    findings: dict[tuple[str, str, str, str], Finding] = {}
    for (step_id, plugin, _), deps in zip(work, per_step, strict=True):
        for dep in deps:
            key = (dep.kind, dep.address, dep.purpose, dep.evidence)
            found = findings.setdefault(
                key, Finding(dep.kind, dep.address, dep.purpose, dep.evidence, blocks_restore=dep.blocks_restore)
            )
            found.steps.append(step_id)
            if plugin.name not in found.found_by:
                found.found_by.append(plugin.name)
    scan = find_references(repo, manifest, [(step_id, plugin.name) for step_id, plugin, _ in work], domain)
    carried = _merge_references(list(findings.values()), scan, domain)
    judged = list(findings.values()) + carried + _other_slots(repo)
    _judge_all(judged, domain, repo, resolve)
    remedies = Remedies(plan, {w[0]: w[2] for w in work}, scan.backup.services, [w[0] for w in work])
    for f in judged:
        _remediate(f, remedies)
    _remediate_repointed_names(judged)
    waivers = _apply_waivers(judged, plan.waivers, today or dt.date.today())
    for f in judged:
        f.hint = fix_hint(f.kind, f.address, f.purpose, f.status, f.blocks_restore)
    # what only the finder found, outside the domain, is counted, not listed: links in annotations and docs
    quiet = [f for f in judged if f.found_by == [FINDER] and f.status == INDEPENDENT]
    judged = [f for f in judged if f.found_by != [FINDER] or f.status != INDEPENDENT]
    order = {INSIDE: 0, UNKNOWN: 1, WAIVED: 2, REMEDIATED: 3, INDEPENDENT: 4}
    judged.sort(key=lambda f: (not f.needed, order[f.status], not f.blocks_restore, f.address))
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    finder = _finder_summary(scan, quiet)
    return IndependenceReport(plan.name, manifest.id, manifest.finished, domain, judged, steps, waivers, now, finder)


def _merge_references(plugin_findings: list[Finding], scan: Scan, domain: FailureDomain) -> list[Finding]:
    """Fold each finder reference into the plugin finding with the same host and port, or make it a finding:
    one address is one finding, whoever found it (``found_by`` says who). Plugin findings that name a
    cluster Service learn which (for the remedies)."""
    names = ClusterNames(domain, scan.backup)
    by_endpoint: dict[Address, Finding] = {}
    for f in plugin_findings:
        address = parse_address(f.address) if f.kind not in NOT_ADDRESSES else None
        if address is not None:
            by_endpoint.setdefault(address, f)
            f.service = None if address.ip is not None else names.service_of(address.host, None)
    out: list[Finding] = []
    for ref in scan.references:
        evidence = ref.evidence_text()
        kinds = sorted(ref.kinds)
        same = by_endpoint.get(Address(ref.host, ref.port)) if not ref.rewritten else None
        if same is not None:
            if FINDER not in same.found_by:
                same.found_by.append(FINDER)
            same.evidence = f"{same.evidence}; finder: {evidence}" if same.evidence else evidence
            same.steps += [s for s in ref.steps if s not in same.steps]
            same.field_kinds = sorted({*same.field_kinds, *kinds})
            continue
        purpose = f"address carried by restored state ({', '.join(kinds)})"
        finding = Finding("reference", ref.address, purpose, evidence, steps=list(ref.steps), found_by=[FINDER])
        finding.service, finding.field_kinds = ref.service, kinds
        if ref.rewritten:
            finding.remedy = Remedy(ref.steps[0], ref.rewritten)
        out.append(finding)
    return out


def _remediate(f: Finding, remedies: Remedies) -> None:
    """Inside, but the plan takes the restored platform off it: remediated, with the step that does it."""
    if f.status != INSIDE or f.blocks_restore:
        return
    note = ""
    if f.remedy is None and f.purpose == IMAGE_REGISTRY:
        f.remedy = remedies.for_image(f.address, f.steps)
    elif f.remedy is None and f.purpose.startswith(CUTOVER_PURPOSE):
        f.remedy = remedies.for_cutover(f.address, f.steps)
    elif f.remedy is None and f.service is not None:
        f.remedy, note = remedies.for_service(f.service)
    if f.remedy is not None:
        f.status = REMEDIATED
        f.detail = f"{f.detail}; remediated by step {f.remedy.step}: {f.remedy.how}"
    elif note:
        f.detail = f"{f.detail}; {note}"


def _remediate_repointed_names(findings: list[Finding]) -> None:
    """A host the old cluster served (in ``ingress_hosts``) is remediated when the plan's cutover re-points
    every record of that name that pointed at an old load balancer: the name then leads to the new cluster."""
    repointed: dict[str, Remedy] = {}
    still_old: set[str] = set()
    for f in findings:
        if f.purpose.startswith(CUTOVER_PURPOSE):
            name = cutover_record_name(f.purpose)
            if f.status == REMEDIATED and f.remedy is not None:
                repointed.setdefault(name, f.remedy)
            else:
                still_old.add(name)
    for f in findings:
        address = parse_address(f.address) if f.status == INSIDE and not f.blocks_restore else None
        host = address.host.rstrip(".").lower() if address is not None else ""
        if f.match is None or f.match.part != "ingress_hosts" or host not in repointed or host in still_old:
            continue
        f.remedy = Remedy(repointed[host].step, f"cutover re-points every record of {host} to the new cluster")
        f.status = REMEDIATED
        f.detail = f"{f.detail}; remediated by step {f.remedy.step}: {f.remedy.how}"


def _finder_summary(scan: Scan, quiet: list[Finding]) -> dict[str, Any]:
    summary = scan.to_dict()
    summary["independent_addresses"] = sorted({f.address for f in quiet})
    return summary


# --- judging ------------------------------------------------------------------------------------------


def _judge_all(findings: list[Finding], domain: FailureDomain, repo: Repository, resolve: bool) -> None:
    names: dict[str, Address] = {}
    for f in findings:
        f.status, f.detail, f.match = _judge(f, domain, repo)
        judged_by_name = f.status == INDEPENDENT and f.kind not in NOT_ADDRESSES
        address = parse_address(f.address) if judged_by_name else None
        if address is not None and address.ip is None and "." in address.host and not address.loopback:
            names[f.address] = address
    if not names:
        return
    resolved = resolve_names({a.host for a in names.values()}) if resolve else {}
    for f in findings:
        if f.address in names:
            f.status, f.detail, f.match = _judge_resolved(f.address, names[f.address], resolved, domain)
            if f.status == UNKNOWN and f.found_by == [FINDER]:
                # written into the platform by people: a name this host cannot resolve that matches nothing in
                # the domain says nothing about the failed cluster (the domain's own names matched above)
                f.status, f.detail = INDEPENDENT, f"{f.detail}; it matches nothing in the failure domain"


def _judge(f: Finding, domain: FailureDomain, repo: Repository) -> tuple[str, str, DomainMatch | None]:
    """First pass, without DNS: the domain, then what the address's shape alone tells."""
    if f.kind == "provisioner":
        return _judge_provisioner(f.address)
    if f.kind == "credential" and f.address.startswith("key slot "):
        return _judge_slot(_slot_by_id(repo, f.address), domain)
    found = domain.match(f.address) or _service_match(f, domain)
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


def _service_match(f: Finding, domain: FailureDomain) -> DomainMatch | None:
    """A short Service name (``minio.storage``, ``redis``) the finder tied to a Service of the backup."""
    suffixes = [k for k in domain.facts if k.endswith("_dns_suffixes")]
    if f.service is None or not suffixes:
        return None
    namespace, name = f.service
    how = "a cluster Service name (namespace in the backup), like"
    return DomainMatch(suffixes[0], f"{name}.{namespace}.svc", how, domain.evidence.get(suffixes[0], ""))


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
