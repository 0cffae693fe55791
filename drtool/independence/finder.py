"""The reference finder: every address the restored platform will carry, found by its shape wherever it sits.

Plugins name what only they know (``dependencies()``: the endpoints a restore contacts, webhook Services,
storage provisioners). Everything else a platform depends on is written by people into ordinary fields —
an env var holding a Vault address, an S3 endpoint in a bucket URL, a database URL in a ConfigMap's
``app.yaml``, a CNAME into the old load balancer — and this finder covers it: it reads every searchable
field of every restored object (``restored.py``: which parts of each artifact format a restore writes),
splits documents embedded in strings into lines (``embedded.py``), and recognises addresses by shape
(``shapes.py``). Bare names are judged only when they can be hosts here: names under the cluster's DNS
suffixes, ``name.namespace`` where the backup holds that namespace, one-label ``name:port`` where the
object's namespace holds a Service of that name, and hosts of the failure domain.

The result is one ``Reference`` per address (and per rewriting, see ``Field.rewritten``) with the steps
that restore it and evidence naming the object, the field path and, inside an embedded document, the
line. The analysis (analysis.py) judges references exactly as it judges plugin dependencies.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from drtool.independence.domain import FailureDomain
from drtool.independence.embedded import Document
from drtool.independence.restored import DNS_RECORD, OBJECTS, Field, reader_for
from drtool.independence.shapes import Found, Names, addresses
from drtool.kube.artifacts import ndjson
from drtool.plugin.contract import RestoreContext
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository

MAX_EVIDENCE = 3
MAX_EXAMPLES = 3  # artifacts named per plugin among those not searched
SERVICE_LABEL = "svc"
ServiceKey = tuple[str, str]  # (namespace, name)


@dataclasses.dataclass
class Reference:
    """An address found in restored state, with every place it was found."""

    address: str  # as reported: scheme://host:port, host:port, an IP or a name (never userinfo, path or query)
    host: str
    port: int | None
    shape: str
    service: ServiceKey | None  # the cluster Service it names, when it is a Service name
    rewritten: str  # the plugin's restore rewrites the field(s): how
    steps: list[str] = dataclasses.field(default_factory=list)
    kinds: set[str] = dataclasses.field(default_factory=set)  # field kinds it was found in
    evidence: list[str] = dataclasses.field(default_factory=list)  # the first MAX_EVIDENCE places
    count: int = 0

    def evidence_text(self) -> str:
        more = f" (+{self.count - len(self.evidence)} more)" if self.count > len(self.evidence) else ""
        return "; ".join(self.evidence) + more


@dataclasses.dataclass
class Backup:
    """What the finder needs to know about the backup: its namespaces and Services, per plugin."""

    namespaces: set[str] = dataclasses.field(default_factory=set)
    services: dict[str, set[ServiceKey]] = dataclasses.field(default_factory=dict)  # plugin -> Services it restores

    def all_services(self) -> set[ServiceKey]:
        return set().union(*self.services.values())


@dataclasses.dataclass
class Scan:
    references: list[Reference]
    backup: Backup
    scanned: dict[str, dict[str, int]]  # plugin -> {"artifacts": n, "fields": n}
    unscanned: dict[str, dict[str, Any]]  # plugin -> {"artifacts": n, "examples": [names]}: binary state
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 3),
            "references": len(self.references),
            "scanned": self.scanned,
            "unscanned": self.unscanned,
        }


class ClusterNames:
    """Which bare names are hosts: the failure domain's, the cluster DNS's, and the backup's Services."""

    def __init__(self, domain: FailureDomain, backup: Backup) -> None:
        self.domain = domain
        self.backup = backup
        self.suffixes = tuple(
            s.strip(".").lower() for k, v in domain.facts.items() if k.endswith("_dns_suffixes") for s in v
        )
        self.services = backup.all_services()
        self._names: dict[str | None, Names] = {}
        endings = sorted({SERVICE_LABEL, *self.suffixes, *backup.namespaces}, key=len, reverse=True)
        self._cluster_text = re.compile(r"\.(?:" + "|".join(map(re.escape, endings)) + r")(?![\w-])", re.IGNORECASE)
        self._records = Names(known=lambda name: self.domain.match(name) is not None)

    def for_field(self, field: Field) -> Names:
        """The shapes' view of bare names for ``field``: a DNS record's targets are hosts by definition, so
        any name of the failure domain counts there; elsewhere only cluster names do (a bare
        ``grafana.example.com`` in values is an Ingress host being declared far more often than used)."""
        if field.kind == DNS_RECORD:
            return self._records
        if field.namespace not in self._names:
            local = {name for ns, name in self.services if ns == field.namespace}
            worth = self._cluster_text.search
            self._names[field.namespace] = Names(self.cluster_name, local.__contains__, lambda text: bool(worth(text)))
        return self._names[field.namespace]

    def cluster_name(self, name: str) -> bool:
        """Under the cluster's DNS suffixes (not the suffix itself), or a Service name of the backup."""
        return self.service_of(name, None) is not None or any(name.endswith(f".{s}") for s in self.suffixes)

    def service_of(self, host: str, namespace: str | None) -> ServiceKey | None:
        """The (namespace, name) a cluster Service name stands for: ``name.ns.svc[.suffix]``, ``name.ns``
        (a namespace of the backup), or a one-label name resolved in ``namespace``."""
        labels = host.split(".")
        for suffix in self.suffixes:
            if host.endswith(f".{suffix}"):
                labels = host[: -len(suffix) - 1].split(".")
                break
        if len(labels) == 3 and labels[2] == SERVICE_LABEL:
            return labels[1], labels[0]
        if len(labels) == 2 and labels[1] in self.backup.namespaces:
            return labels[1], labels[0]
        if len(labels) == 1 and namespace is not None and (namespace, labels[0]) in self.services:
            return namespace, labels[0]
        return None


def find_references(
    repo: Repository, manifest: Manifest, steps: Sequence[tuple[str, str]], domain: FailureDomain, workers: int = 4
) -> Scan:
    """Every address in the restored state of ``steps`` ((step id, plugin) pairs) of ``manifest``'s backup."""
    started = time.monotonic()
    plugins = sorted({plugin for _, plugin in steps})
    contexts = {p: _context(repo, manifest, p) for p in plugins}
    backup = index_backup(contexts)
    names = ClusterNames(domain, backup)
    by_plugin = {p: [s for s, q in steps if q == p] for p in plugins}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="drtool-finder") as pool:
        results = list(pool.map(lambda p: _scan_plugin(contexts[p], p, names), plugins))
    found: dict[tuple[str, str], Reference] = {}
    scanned: dict[str, dict[str, int]] = {}
    unscanned: dict[str, dict[str, Any]] = {}
    for plugin, (refs, fields, artifacts, skipped) in zip(plugins, results, strict=True):
        scanned[plugin] = {"artifacts": artifacts, "fields": fields}
        if skipped:
            unscanned[plugin] = {"artifacts": len(skipped), "examples": sorted(skipped)[:MAX_EXAMPLES]}
        for ref in refs.values():
            _merge(found, ref, by_plugin[plugin])
    return Scan(list(found.values()), backup, scanned, unscanned, time.monotonic() - started)


def _context(repo: Repository, manifest: Manifest, plugin: str) -> RestoreContext:
    from drtool.repo.restore_context import PluginRestoreContext

    return PluginRestoreContext(repo, manifest, plugin)  # type: ignore[return-value]


def index_backup(contexts: Mapping[str, RestoreContext]) -> Backup:
    """Namespaces and Services of every Kubernetes-object artifact, read before anything is searched."""
    backup = Backup()
    for plugin, ctx in contexts.items():
        for art in ctx.artifacts:
            if art.meta.get("format") != OBJECTS or art.meta.get("group"):
                continue
            resource = art.meta.get("resource")
            if resource in ("namespaces", "services"):
                for record in ndjson(ctx, art.name):
                    meta = (record.get("object") or {}).get("metadata") or {}
                    if resource == "namespaces":
                        backup.namespaces.add(str(meta.get("name")))
                    else:
                        namespace = str(meta.get("namespace"))
                        backup.services.setdefault(plugin, set()).add((namespace, str(meta.get("name"))))
                        backup.namespaces.add(namespace)
    return backup


def _scan_plugin(
    ctx: RestoreContext, plugin: str, names: ClusterNames
) -> tuple[dict[tuple[str, str], Reference], int, int, list[str]]:
    """(references, fields searched, artifacts searched, artifacts not searched) of one plugin's backup."""
    refs: dict[tuple[str, str], Reference] = {}
    fields = artifacts = 0
    skipped = []
    for art in ctx.artifacts:
        reader = reader_for(plugin, art)
        if reader is None:
            skipped.append(art.name)
            continue
        artifacts += 1
        for field in reader(ctx, art):
            fields += 1
            for line, found in search(field, names):
                _add(refs, found, field, line, names)
    return refs, fields, artifacts, skipped


def search(field: Field, names: ClusterNames) -> Iterable[tuple[int | None, Found]]:
    """Every address in one field, with the line of an embedded document it is on."""
    document = Document(field.value, field.path.rsplit(".", 1)[-1])
    for position, found in addresses(document.text, names.for_field(field), document.key_at):
        yield document.line_at(position), found


def _add(
    refs: dict[tuple[str, str], Reference], found: Found, field: Field, line: int | None, names: ClusterNames
) -> None:
    key = (found.text, field.rewritten)
    ref = refs.get(key)
    if ref is None:
        service = names.service_of(found.host, field.namespace)  # None for an IP: no rule takes four labels
        ref = refs[key] = Reference(found.text, found.host, found.port, found.shape, service, field.rewritten)
    ref.kinds.add(field.kind)
    ref.count += 1
    if len(ref.evidence) < MAX_EVIDENCE:
        where = f"{field.owner} {field.path}".rstrip() + (f" line {line}" if line is not None else "")
        ref.evidence.append(where)


def _merge(found: dict[tuple[str, str], Reference], ref: Reference, steps: list[str]) -> None:
    key = (ref.address, ref.rewritten)
    have = found.get(key)
    if have is None:
        found[key] = dataclasses.replace(ref, steps=list(steps), kinds=set(ref.kinds), evidence=list(ref.evidence))
        return
    have.steps += [s for s in steps if s not in have.steps]
    have.kinds |= ref.kinds
    have.evidence += ref.evidence[: MAX_EVIDENCE - len(have.evidence)]
    have.count += ref.count
