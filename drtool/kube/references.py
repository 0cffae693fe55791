"""What a restore contacts, and what the restored objects will point at (for the independence analysis).

Kept to references that are well defined and cheap to find in the records:
- container images: any string field named ``image`` (containers of pods and pod templates, and custom
  resources such as TrainJobs with ``spec.trainer.image``): the registry host each image is pulled from;
- Vault servers: the agent injector's ``vault.hashicorp.com/service`` annotation and ``vault.server`` in
  issuers and secret stores (cert-manager, External Secrets);
- ACME servers of cert-manager issuers;
- admission webhooks, CRD conversion webhooks and aggregated APIs: the URL or in-cluster Service they call;
  an admission webhook with ``failurePolicy: Fail`` (the default) or a conversion webhook served by an
  in-cluster Service blocks the restore itself (``blocks_restore``): that Service will not exist yet
  when the objects are written, and the API server rejects every write it cannot send to it;
- StorageClasses: the provisioner that will create the restored PersistentVolumes (kind ``provisioner``);
- GitOps sources the controllers sync from: Argo CD Application and ApplicationSet ``repoURL``, Flux
  GitRepository, HelmRepository, OCIRepository ``spec.url`` and Bucket ``spec.endpoint``;
- DNS servers: the ``forward`` targets of CoreDNS's Corefile (ConfigMap kube-system/coredns).
Other Secrets and ConfigMaps are not scanned: their contents are opaque data, not references.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from drtool.errors import DrtoolError
from drtool.plugin.contract import Dependency, RestoreContext
from drtool.plugin.toolkit.oci.refs import registry_host

from .artifacts import records, types_in
from .kubeconfig import load_configuration
from .objects import object_key
from .settings import Connection

UNSCANNED = ("secrets", "configmaps")
VAULT_ANNOTATIONS = ("vault.hashicorp.com/service", "vault.hashicorp.com/address")
MAX_EVIDENCE = 3
COREDNS = "kube-system/coredns"  # the one ConfigMap scanned: its Corefile names the cluster's upstream DNS
ADMISSION_WEBHOOKS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
FLUX_SOURCES = {"GitRepository": "url", "HelmRepository": "url", "OCIRepository": "url", "Bucket": "endpoint"}


class Reference(NamedTuple):
    """One reference an object carries: a ``Dependency`` of the restore once its evidence is gathered."""

    address: str
    purpose: str
    field: str  # where in the object
    kind: str = "reference"  # or "provisioner" (a storage provisioner's name: Dependency.kind)
    blocks_restore: bool = False  # Dependency.blocks_restore


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any, str]]:
    """Every (key, value, parent path) in nested dicts and lists."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k, v, path
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, path)


def _is_image(key: str, value: Any) -> bool:
    return key == "image" and isinstance(value, str) and bool(value) and " " not in value


def image_references(obj: Any) -> Iterator[str]:
    """Every container image reference an object carries (any string field named ``image``)."""
    for key, value, _ in _walk(obj):
        if _is_image(key, value):
            yield value


def _svc(ref: Mapping[str, Any]) -> str:
    port = f":{ref['port']}" if ref.get("port") else ""
    return f"{ref.get('name')}.{ref.get('namespace')}.svc{port}"


def _client_config(value: dict[str, Any], parent: str, blocking: bool) -> Iterator[Reference]:
    """A webhook's ``clientConfig``: a URL is an ordinary endpoint; an in-cluster Service may block."""
    if value.get("url"):
        yield Reference(value["url"], "webhook URL the API server calls", f"{parent}.clientConfig.url")
    elif isinstance(value.get("service"), dict):
        purpose = "in-cluster webhook Service the API server calls"
        if blocking:
            purpose = f"{purpose}, which will not exist yet when the restore writes objects"
        yield Reference(_svc(value["service"]), purpose, f"{parent}.clientConfig.service", blocks_restore=blocking)


def _admission_webhooks(obj: dict[str, Any]) -> Iterator[Reference]:
    for i, hook in enumerate(obj.get("webhooks") or []):
        if isinstance(hook, dict) and isinstance(hook.get("clientConfig"), dict):
            blocking = hook.get("failurePolicy", "Fail") == "Fail"
            yield from _client_config(hook["clientConfig"], f"webhooks[{i}]", blocking)


def _gitops_sources(obj: dict[str, Any]) -> Iterator[Reference]:
    api_version, kind = str(obj.get("apiVersion", "")), obj.get("kind")
    if api_version.startswith("argoproj.io/") and kind in ("Application", "ApplicationSet"):
        for key, value, parent in _walk(obj.get("spec") or {}, ".spec"):
            if key == "repoURL" and isinstance(value, str) and value:
                yield Reference(value, f"GitOps source Argo CD {kind} syncs from", f"{parent[1:]}.repoURL")
    elif api_version.startswith("source.toolkit.fluxcd.io/") and kind in FLUX_SOURCES:
        field = FLUX_SOURCES[kind]
        url = (obj.get("spec") or {}).get(field)
        if isinstance(url, str) and url:
            yield Reference(url, f"GitOps source Flux {kind} syncs from", f"spec.{field}")


def dns_forwarders(corefile: str) -> Iterator[str]:
    """The upstream servers of every ``forward FROM TO...`` line (files such as /etc/resolv.conf excepted)."""
    for line in corefile.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 3 and words[0] == "forward":
            for to in words[2:]:
                if to == "{":
                    break
                if not to.startswith("/"):
                    yield to


def references(obj: dict[str, Any]) -> Iterator[Reference]:
    """Each reference one object carries."""
    kind = obj.get("kind")
    for key, value, parent in _walk(obj):
        if _is_image(key, value):
            yield Reference(registry_host(value), "container image registry", f"image {value}")
        elif key in ("vault", "acme") and isinstance(value, dict) and isinstance(value.get("server"), str):
            yield Reference(
                value["server"], f"{'Vault' if key == 'vault' else 'ACME'} server", f"{parent[1:]}.{key}.server"
            )
        elif key == "clientConfig" and isinstance(value, dict) and kind not in ADMISSION_WEBHOOKS:
            yield from _client_config(value, parent[1:], blocking=kind == "CustomResourceDefinition")
    if kind in ADMISSION_WEBHOOKS:
        yield from _admission_webhooks(obj)
    if kind == "StorageClass" and obj.get("provisioner"):
        purpose = "StorageClass provisioner that creates the restored PersistentVolumes"
        yield Reference(obj["provisioner"], purpose, "provisioner", kind="provisioner")
    if kind == "ConfigMap" and object_key(obj) == COREDNS:
        for server in dns_forwarders((obj.get("data") or {}).get("Corefile", "")):
            yield Reference(server, "upstream DNS server the cluster's CoreDNS forwards to", "data.Corefile forward")
    yield from _gitops_sources(obj)
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    for name in VAULT_ANNOTATIONS:
        if annotations.get(name):
            yield Reference(annotations[name], "Vault address", f"annotation {name}")
    if obj.get("kind") == "APIService" and isinstance((obj.get("spec") or {}).get("service"), dict):
        yield Reference(_svc(obj["spec"]["service"]), "in-cluster Service of an aggregated API", "spec.service")


def dependencies(ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
    deps = [_target_endpoint(target)]
    found: dict[tuple[str, str, str, bool], list[str]] = {}
    counts: dict[tuple[str, str, str, bool], int] = {}
    shown: dict[tuple[str, str, str, bool], set[str]] = {}  # the types each reference's evidence names
    for t in sorted(types_in(ctx), key=lambda t: t.key):  # evidence in the same order whatever the backup's
        if t.key in UNSCANNED and t.key != "configmaps":
            continue
        for rec in records(ctx, t):
            if t.key == "configmaps" and object_key(rec["object"]) != COREDNS:
                continue
            for ref in references(rec["object"]):
                key = (ref.address, ref.purpose, ref.kind, ref.blocks_restore)
                where = found.setdefault(key, [])
                counts[key] = counts.get(key, 0) + 1
                types = shown.setdefault(key, set())
                if len(where) < MAX_EVIDENCE and t.key not in types:  # one example per type: where it comes from
                    types.add(t.key)
                    where.append(f"{t.key} {object_key(rec['object'])} {ref.field}")
    for key, where in sorted(found.items()):
        address, purpose, kind, blocks = key
        more = f" (+{counts[key] - len(where)} more)" if counts[key] > len(where) else ""
        deps.append(Dependency(kind, address, purpose, "; ".join(where) + more, blocks_restore=blocks))
    return deps


def _target_endpoint(target: Mapping[str, Any]) -> Dependency:
    try:
        server = load_configuration(Connection.from_mapping(target)).host
    except DrtoolError as exc:
        server = f"(unresolved: {exc.message})"
    purpose = "target Kubernetes API server the objects are applied to"
    return Dependency("endpoint", server, purpose, "target kubeconfig")
