"""Realistic content for a lab's kube-apiserver: what an AI platform's cluster holds, through the real API.

The kubernetes and kueue plugins are only as well tested as the cluster they back up, so the seed is what
such a platform really keeps: the upstream CRDs from their pinned Go modules (``drtool_lab.upstream``:
Kueue, JobSet, Kubeflow Trainer, cert-manager, Velero, ...), upstream sample objects as they are
(``kube_samples.yaml``), and per team namespace RBAC, ConfigMaps, Secrets of several types, Services (one
LoadBalancer), an Ingress, Deployments, CronJobs, PVCs, NetworkPolicies, ResourceQuotas, JobSets,
TrainJobs, InferenceServices, cert-manager Issuers and Certificates; Kueue quotas and policies (GPU
ResourceFlavors with node labels and taints, a Cohort hierarchy, ClusterQueues with nominal quotas,
borrowing and lending limits and preemption policies, LocalQueues, WorkloadPriorityClasses,
AdmissionChecks, a Topology). Owner chains carry real UIDs (Deployment -> ConfigMap -> Secret, TrainJob ->
JobSet) and some objects have status written through their /status subresource, because a restore has to
remap and re-apply exactly those.

``objects`` scales the bulk (ConfigMaps and Secrets spread over the team namespaces) so that the seed
creates about that many objects in total. Requests run on a thread pool, one keep-alive session per
thread. Seeding is idempotent: objects that already exist are counted, not changed. Secret values are
deterministic (``secret_value``), so a test can check a restored Secret without keeping the source.

Everything written here goes through plain HTTP (``requests``), not through the plugins' code, so a bug
there cannot hide itself in both the write and the check.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import functools
import hashlib
import json
import string
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests
import yaml
from drtool_lab import upstream
from drtool_lab.components.kube_apiserver import FIELD_MANAGER, KubeAccess
from drtool_lab.upstream import Loader

from drtool.errors import SourceError
from drtool.servers import pki

Obj = dict[str, Any]

WORKERS = 8
KUEUE_API = "kueue.x-k8s.io/v1beta2"  # the version the pinned Kueue serves and the seed writes
SEED_LABEL = "drtool.dev/seed"  # on everything the seed generates (not on the upstream samples, kept as-is)


def samples() -> list[Obj]:
    """The sample custom resources in ``kube_samples.yaml``, as they are (namespaced ones go to ``default``)."""
    return [d for d in yaml.load_all(Path(__file__).with_name("kube_samples.yaml").read_text(), Loader=Loader) if d]


# --- a small REST client: discovery, create, apply, status ----------------------------------------


@dataclasses.dataclass(frozen=True)
class Resource:
    plural: str
    namespaced: bool


class KubeClient:
    """Just enough of the Kubernetes REST API for seeding, safe to share between threads.

    Each thread gets its own keep-alive session; resource names come from discovery (cached per
    group/version, refreshed when a kind is missing: a CRD established a moment ago may not be listed yet).
    """

    def __init__(self, access: KubeAccess, *, timeout: float = 60.0) -> None:
        self.access = access
        self.timeout = timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._resources: dict[str, dict[str, Resource]] = {}  # apiVersion -> kind -> resource

    def session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = self.access.session()
        return session

    def request(self, method: str, path: str, *, ok: Sequence[int] = (200, 201), **kwargs: Any) -> requests.Response:
        """One call, retried on throttling, server errors and dropped connections (the lab is busy, not broken)."""
        for attempt in range(6):
            try:
                resp = self.session().request(method, self.access.url + path, timeout=self.timeout, **kwargs)
            except requests.ConnectionError:
                if attempt == 5:
                    raise
                time.sleep(0.2 * 2**attempt)
                continue
            if resp.status_code in ok or (resp.status_code not in (429, 500, 503, 504)) or attempt == 5:
                return resp
            time.sleep(float(resp.headers.get("Retry-After", 0.2 * 2**attempt)))
        raise AssertionError("unreachable")

    def resource(self, api_version: str, kind: str) -> Resource:
        deadline = time.monotonic() + 30
        while True:
            found = self._resources.get(api_version, {}).get(kind)
            if found:
                return found
            self._discover(api_version)
            found = self._resources.get(api_version, {}).get(kind)
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if not found:
            raise SourceError(f"the API server does not serve {kind} in {api_version}", "is its CRD installed?")
        return found

    def _discover(self, api_version: str) -> None:
        path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        resp = self.request("GET", path, ok=(200, 404))
        if resp.status_code == 404:
            return
        kinds = {
            r["kind"]: Resource(r["name"], r["namespaced"]) for r in resp.json()["resources"] if "/" not in r["name"]
        }
        with self._lock:
            self._resources[api_version] = kinds

    def collection_path(self, api_version: str, kind: str, namespace: str | None = None) -> str:
        res = self.resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if res.namespaced:
            return f"{base}/namespaces/{namespace or 'default'}/{res.plural}"
        return f"{base}/{res.plural}"

    def object_path(self, obj: Mapping[str, Any], subresource: str = "") -> str:
        meta = obj["metadata"]
        path = f"{self.collection_path(obj['apiVersion'], obj['kind'], meta.get('namespace'))}/{meta['name']}"
        return f"{path}/{subresource}" if subresource else path

    def namespaced(self, obj: Mapping[str, Any]) -> bool:
        return self.resource(obj["apiVersion"], obj["kind"]).namespaced

    def create(self, obj: Obj, *, read_existing: bool = True) -> tuple[Obj, bool]:
        """POST ``obj``; an object that already exists is read back instead. Returns (object, created).

        ``read_existing=False`` returns ``obj`` itself for an existing object (one request, not two).
        """
        meta = obj["metadata"]
        path = self.collection_path(obj["apiVersion"], obj["kind"], meta.get("namespace"))
        resp = self.request("POST", path, data=json.dumps(obj), headers={"Content-Type": "application/json"})
        if resp.status_code == 409 and not read_existing:
            return obj, False
        if resp.status_code == 409:
            existing = self.request("GET", f"{path}/{meta['name']}")
            _raise_for(existing, "reading", obj)
            return existing.json(), False
        _raise_for(resp, "creating", obj)
        return resp.json(), True

    def apply(self, obj: Obj, subresource: str = "") -> tuple[Obj, bool]:
        """Server-side apply (as ``kubectl apply --server-side`` would), optionally to a subresource.

        Returns (object, created).
        """
        resp = self.request(
            "PATCH",
            self.object_path(obj, subresource),
            params={"fieldManager": FIELD_MANAGER, "force": "true"},
            data=json.dumps(obj),
            headers={"Content-Type": "application/apply-patch+yaml"},
        )
        _raise_for(resp, f"applying {subresource or 'object'}", obj)
        return resp.json(), resp.status_code == 201

    def get(self, path: str) -> Obj:
        resp = self.request("GET", path)
        if not resp.ok:
            raise SourceError(f"GET {path} failed: HTTP {resp.status_code}", resp.text[:300])
        return resp.json()


def _raise_for(resp: requests.Response, what: str, obj: Mapping[str, Any]) -> None:
    if not resp.ok:
        meta = obj.get("metadata", {})
        ref = f"{obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name')}".replace(" /", " ")
        raise SourceError(f"{what} {ref} failed: HTTP {resp.status_code}", _reason(resp))


def _reason(resp: requests.Response) -> str:
    try:
        return str(resp.json().get("message", resp.text))[:300]
    except ValueError:
        return resp.text[:300]


# --- the seeded platform ----------------------------------------------------------------------------
# The objects are YAML templates in kube_seed.yaml; this part fills them in per team and links owners.


@dataclasses.dataclass(frozen=True)
class Team:
    namespace: str
    flavor: str  # the GPU flavor it owns quota of
    gpus: int
    cohort: str
    image: str

    @property
    def short(self) -> str:
        return self.namespace.removeprefix("team-")

    @property
    def cluster_queue(self) -> str:
        return f"cq-{self.short}"

    @property
    def local_queue(self) -> str:
        return f"{self.short}-queue"


TEAMS: tuple[Team, ...] = (
    Team("team-nlp", "h100", 16, "training", "registry.ml.example.com/nlp/llm-trainer:2.4.1"),
    Team("team-vision", "a100", 8, "training", "registry.ml.example.com/vision/detector:1.9.0"),
    Team("team-speech", "l4", 8, "inference", "registry.ml.example.com/speech/asr-server:3.2.0"),
    Team("research", "a100", 4, "exploration", "registry.ml.example.com/research/notebook:2026.10"),
)

# GPU node pools as Kueue ResourceFlavors: what the nodes carry (labels, taints) and pods must tolerate
GPU_FLAVORS: dict[str, tuple[str, str]] = {
    "a100": ("nvidia-a100-80gb", "a2-ultragpu-8g"),
    "h100": ("nvidia-h100-80gb", "a3-highgpu-8g"),
    "l4": ("nvidia-l4", "g2-standard-48"),
}


# GPU capacity bought through queued provisioning: only these flavors' quota waits on the AdmissionCheck
# `gpu-provisioning` (a ProvisioningRequest no lab autoscaler answers, so Kueue holds such workloads)
PROVISIONED_FLAVORS = frozenset({"h100"})


def secret_value(namespace: str, name: str, key: str) -> str:
    """The deterministic, distinctive value the seed stores under ``key`` of Secret ``namespace/name``."""
    digest = hashlib.sha256(f"{namespace}/{name}/{key}".encode()).hexdigest()[:32]
    return f"drtool-seed:{namespace}:{name}:{key}:{digest}"


@functools.cache
def templates() -> dict[str, str]:
    """The named YAML templates in ``kube_seed.yaml`` (beside this module; shipped as package data)."""
    return yaml.safe_load(Path(__file__).with_name("kube_seed.yaml").read_text())


def render(template: str, /, **values: object) -> list[Obj]:
    """Render ``template`` (a name) with ``values``; label every object as the seed's (not the samples)."""
    text = string.Template(templates()[template]).substitute(values)
    docs = [d for d in yaml.load_all(text, Loader=Loader) if d]
    for doc in docs:
        doc["metadata"].setdefault("labels", {})[SEED_LABEL] = "true"
        if doc["kind"] == "Secret" and "stringData" in doc:
            meta = doc["metadata"]
            doc["stringData"] = {k: secret_value(meta["namespace"], meta["name"], k) for k in doc["stringData"]}
    return docs


def _team_values(team: Team, **more: object) -> dict[str, object]:
    return {"ns": team.namespace, "short": team.short, "cq": team.cluster_queue, "lq": team.local_queue, **more}


def namespaces(extra: Iterable[str] = ()) -> list[Obj]:
    teams = [t.namespace for t in TEAMS]
    names = teams + sorted(set(extra) - {"default", *teams})
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": {SEED_LABEL: "true"}}}
            for n in names]  # fmt: skip
    for doc, team in zip(docs, TEAMS, strict=False):
        doc["metadata"]["labels"]["team"] = team.short
    return docs


def cluster_objects() -> list[Obj]:
    """Cluster-scoped policy: RBAC, scheduling and storage classes, Kueue flavors, cohorts, queues, checks."""
    objs = render("cluster")
    for name, (accelerator, instance) in GPU_FLAVORS.items():
        objs += render("flavor", name=name, accelerator=accelerator, instance=instance)
    next(o for o in objs if o["metadata"]["name"] == "h100")["spec"]["topologyName"] = "gpu-topology"
    for team in TEAMS:
        spare = "h100" if team.flavor == "a100" else "a100"
        values = _team_values(team, cohort=team.cohort, flavor=team.flavor, gpus=team.gpus, spare=spare)
        queue = render("cluster_queue", **values, borrow=team.gpus // 2, lend=team.gpus // 4)[0]
        if team.flavor not in PROVISIONED_FLAVORS:
            del queue["spec"]["admissionChecksStrategy"]
        objs.append(queue)
    return objs


def team_objects(team: Team, tls: TeamPki) -> list[Obj]:
    """What one team namespace holds; ``tls`` has real PEM pairs for its TLS Secret and its CA's Secret."""
    objs = render("team", **_team_values(team, image=team.image, quota=team.gpus * 2))
    for obj in objs:
        if obj["kind"] != "Secret":
            continue
        if obj["type"] == "kubernetes.io/tls":
            cert, key = tls.ca if obj["metadata"]["name"].endswith("-ca") else tls.serving
            obj["stringData"] = {"tls.crt": cert, "tls.key": key}
        elif obj["type"] == "kubernetes.io/dockerconfigjson":
            password = secret_value(team.namespace, "registry-pull", "password")
            auth = base64.b64encode(f"{team.short}-puller:{password}".encode()).decode()
            obj["stringData"] = {
                ".dockerconfigjson": json.dumps({"auths": {"registry.ml.example.com": {"auth": auth}}})
            }
    return objs


def edge_objects() -> list[Obj]:
    return render("edge")


def statuses(now: str) -> list[Obj]:
    """Objects carrying only their status, written through /status after the objects exist."""
    objs = render("status")
    for team in TEAMS:
        objs += render("team_status", **_team_values(team, now=now))
    return objs


def _owner(obj: Mapping[str, Any]) -> Obj:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _owned(obj: Obj, owner: Mapping[str, Any]) -> Obj:
    obj["metadata"]["ownerReferences"] = [_owner(owner)]
    return obj


def owned_by_deployment(deployment: Obj) -> Obj:
    """First link of Deployment -> ConfigMap -> Secret."""
    meta = deployment["metadata"]
    return _owned(render("owned_configmap", name=meta["name"], ns=meta["namespace"])[0], deployment)


def owned_by_configmap(configmap: Obj) -> Obj:
    """Second link: a Secret owned by the ConfigMap a Deployment owns."""
    meta = configmap["metadata"]
    name = meta["name"].removesuffix("-config")
    return _owned(render("owned_secret", name=name, ns=meta["namespace"])[0], configmap)


def owned_by_trainjob(trainjob: Obj) -> Obj:
    meta = trainjob["metadata"]
    image = trainjob["spec"]["trainer"]["image"]
    return _owned(render("owned_jobset", name=meta["name"], ns=meta["namespace"], image=image)[0], trainjob)


def bulk_objects(count: int) -> Iterator[Obj]:
    """``count`` ConfigMaps and Secrets (alternating), round-robin over the team namespaces, ~1 KiB each.

    Built as dicts, not rendered YAML: at 20,000+ objects parsing YAML would cost more than sending them.
    """
    for i in range(count):
        team = TEAMS[i % len(TEAMS)]
        labels = {SEED_LABEL: "bulk", "app.kubernetes.io/component": "experiment", "team": team.short}
        if i % 2 == 0:
            params = "".join(f"layer_{j}_dropout: 0.{(i + j) % 10}\n" for j in range(24))
            meta = {"name": f"experiment-{i:06d}", "namespace": team.namespace, "labels": labels}
            yield {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                   "data": {"params.yaml": params, "run": f"run-{i:06d}"}}  # fmt: skip
        else:
            name = f"experiment-{i:06d}-creds"
            meta = {"name": name, "namespace": team.namespace, "labels": labels}
            data = {k: secret_value(team.namespace, name, k) for k in ("MLFLOW_TRACKING_TOKEN", "WANDB_API_KEY")}
            yield {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "stringData": data}


# --- running it ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class SeedResult:
    """What a seed did: objects per kind (created or found already there) and how fast."""

    counts: Counter[str] = dataclasses.field(default_factory=Counter)
    api_versions: dict[str, str] = dataclasses.field(default_factory=dict)  # kind -> apiVersion it was seeded as
    refs: set[tuple[str, str, str]] = dataclasses.field(default_factory=set)  # (kind, namespace, name)
    created: int = 0
    existing: int = 0
    seconds: float = 0.0
    bulk: int = 0
    bulk_seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def rate(self) -> float:
        return self.total / self.seconds if self.seconds else 0.0

    @property
    def bulk_rate(self) -> float:
        return self.bulk / self.bulk_seconds if self.bulk_seconds else 0.0


class _Seeder:
    def __init__(self, client: KubeClient, workers: int) -> None:
        self.client = client
        self.workers = workers
        self.result = SeedResult()
        self._lock = threading.Lock()

    def _count(self, obj: Mapping[str, Any], created: bool) -> None:
        """Count each object once (two upstream samples define the same ClusterQueue, for one)."""
        meta = obj["metadata"]
        ref = (obj["kind"], meta.get("namespace", ""), meta["name"])
        with self._lock:
            if ref in self.result.refs:
                return
            self.result.refs.add(ref)
            self.result.counts[obj["kind"]] += 1
            self.result.api_versions.setdefault(obj["kind"], obj["apiVersion"])
            if created:
                self.result.created += 1
            else:
                self.result.existing += 1

    def create(self, obj: Obj) -> Obj:
        stored, created = self.client.create(obj)
        self._count(obj, created)
        return stored

    def add(self, obj: Obj) -> None:
        """``create`` for objects nothing refers to by UID (the bulk): an existing one costs one request."""
        self._count(obj, self.client.create(obj, read_existing=False)[1])

    def apply(self, obj: Obj) -> Obj:
        """Upstream samples go in like `kubectl apply --server-side` (two samples define the same queue)."""
        obj = copy.deepcopy(obj)
        if self.client.namespaced(obj):
            obj["metadata"].setdefault("namespace", "default")
        stored, created = self.client.apply(obj)
        self._count(obj, created)
        return stored

    def status(self, obj: Obj) -> Obj:
        return self.client.apply(obj, "status")[0]

    def each(self, fn: Callable[[Any], Obj], items: Iterable[Any]) -> list[Obj]:
        """``fn`` over ``items`` on the thread pool, in order; the first failure is raised."""
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(fn, items))

    def stream(self, fn: Callable[[Any], object], items: Iterable[Any]) -> None:
        """Like ``each`` for many items: a bounded window of requests in flight, results dropped."""
        window = self.workers * 4
        with ThreadPoolExecutor(self.workers) as pool:
            pending: deque[Any] = deque()
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= window:
                    pending.popleft().result()
            for future in pending:
                future.result()


def wait_established(client: KubeClient, names: Iterable[str], timeout: float = 60.0) -> None:
    """Wait until every CRD is Established and each served version is in discovery, as `kubectl wait` and a
    controller's REST mapper need: Kueue reads discovery at start and exits on a kind not yet listed there
    ("no matches for kind Workload"), which the API server can still say for a moment after Established."""
    pending = set(names)
    deadline = time.monotonic() + timeout
    while pending:
        for name in sorted(pending):
            crd = client.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
            if conditions.get("Established") == "True" and _in_discovery(client, crd):
                pending.discard(name)
        if pending and time.monotonic() > deadline:
            raise SourceError(f"CRDs not Established after {timeout:.0f}s: {', '.join(sorted(pending))}")
        if pending:
            time.sleep(0.2)


def _in_discovery(client: KubeClient, crd: Obj) -> bool:
    spec = crd["spec"]
    for version in (v["name"] for v in spec["versions"] if v.get("served")):
        resp = client.request("GET", f"/apis/{spec['group']}/{version}")
        if resp.status_code == 404:
            return False
        _raise_for(resp, "discovering", crd)
        if spec["names"]["plural"] not in {r.get("name") for r in resp.json().get("resources") or []}:
            return False
    return True


def wait_queue_verdicts(client: KubeClient, timeout: float = 120.0) -> None:
    """Wait until Kueue's verdict on every ClusterQueue is settled (drtool_plugins.kueue.verdicts): a backup
    taken before then would record a passing moment (``AdmissionCheckNotFound`` for a check that exists, no
    verdict at all) as the source's state, and its restore's verify would compare the target with that."""
    from drtool_plugins.kueue.verdicts import active_checks, unsettled  # the plugin loads only for a living seed

    deadline = time.monotonic() + timeout
    while True:
        queues, flavors, checks = (
            client.get(f"/apis/{KUEUE_API}/{kind}").get("items") or []
            for kind in ("clusterqueues", "resourceflavors", "admissionchecks")
        )
        names, active = {f["metadata"]["name"] for f in flavors}, active_checks(checks)
        waiting = [why for q in queues if (why := unsettled(q, names, active))]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise SourceError(f"Kueue's verdicts did not settle in {timeout:.0f}s: {'; '.join(waiting)}")
        time.sleep(0.2)


def install_crds(client: KubeClient, modules: Iterable[str], files: Iterable[str] = ()) -> list[str]:
    """Create (if missing) the CRDs of the pinned upstream ``modules`` (those of their ``files`` globs, when
    given, else those the table names) and wait until they are Established, as `kubectl apply -f crds/ &&
    kubectl wait --for condition=Established` would. Returns their names."""
    files = tuple(files)
    docs = [d for m in modules for d in upstream.yaml_docs(m, files)] if files else upstream.crds(modules)
    for doc in docs:
        client.create(doc, read_existing=False)
    names = [d["metadata"]["name"] for d in docs]
    wait_established(client, names)
    return names


@dataclasses.dataclass(frozen=True)
class TeamPki:
    """(certificate, key) PEM pairs: the team's serving certificate, and the CA its cert-manager Issuer signs with."""

    serving: tuple[str, str]
    ca: tuple[str, str]


def _tls_pair(directory: Path, team: Team) -> TeamPki:
    """A real certificate and key for the team's TLS Secret, signed by a throwaway CA (the team Issuer's)."""
    ca = pki.make_ca(directory, "drtool lab seed CA")
    files = pki.issue(ca, directory, team.short, f"{team.short}.ml.example.com", sans=[f"{team.short}.ml.example.com"])
    return TeamPki((files.cert.read_text(), files.key.read_text()), (ca.cert.read_text(), ca.key.read_text()))


def seed(
    access: KubeAccess,
    objects: int = 0,
    *,
    workers: int = WORKERS,
    progress: Callable[[str], None] | None = None,
) -> SeedResult:
    """Seed the API server at ``access`` (an admin); ``objects`` > baseline adds bulk ConfigMaps/Secrets."""
    note = progress or (lambda _msg: None)
    seeder = _Seeder(KubeClient(access), workers)
    start = time.monotonic()
    crd_docs, sample_docs = upstream.crds(), samples()
    note(f"installing {len(crd_docs)} CRDs")
    seeder.each(seeder.create, crd_docs)
    wait_established(seeder.client, [d["metadata"]["name"] for d in crd_docs])
    extra_ns = {d["metadata"]["namespace"] for d in sample_docs if d["metadata"].get("namespace")}
    seeder.each(seeder.create, namespaces(extra_ns))
    note("creating cluster policy, team namespaces and upstream samples")
    with tempfile.TemporaryDirectory(prefix="drtool-seed-") as tmp:
        tls = {t.namespace: _tls_pair(Path(tmp), t) for t in TEAMS}
    team_objs = [o for t in TEAMS for o in team_objects(t, tls[t.namespace])]
    stored = seeder.each(seeder.create, cluster_objects() + team_objs + edge_objects())
    for doc in sample_docs:  # sequential: two samples define the same ClusterQueue, and apply merges them
        seeder.apply(doc)
    note("owner chains and status subresources")
    by_kind: dict[str, list[Obj]] = {}
    for obj in stored:
        by_kind.setdefault(obj["kind"], []).append(obj)
    deployments = [d for d in by_kind["Deployment"] if d["metadata"]["name"] == "model-server"]
    configmaps = seeder.each(seeder.create, [owned_by_deployment(d) for d in deployments])
    seeder.each(seeder.create, [owned_by_configmap(c) for c in configmaps])
    seeder.each(seeder.create, [owned_by_trainjob(t) for t in by_kind["TrainJob"]])
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    seeder.each(seeder.status, statuses(now))
    bulk = max(0, objects - seeder.result.total)
    if bulk:
        note(f"creating {bulk} bulk ConfigMaps and Secrets")
        bulk_start = time.monotonic()
        seeder.stream(seeder.add, bulk_objects(bulk))
        seeder.result.bulk, seeder.result.bulk_seconds = bulk, time.monotonic() - bulk_start
    seeder.result.seconds = time.monotonic() - start
    return seeder.result
