"""What a restore contacts, and what the restored objects will point at (for the independence analysis).

Kept to references that are well defined and cheap to find in the records:
- container images: any string field named ``image`` (containers of pods and pod templates, and custom
  resources such as TrainJobs with ``spec.trainer.image``): the registry host each image is pulled from;
- Vault servers: the agent injector's ``vault.hashicorp.com/service`` annotation and ``vault.server`` in
  issuers and secret stores (cert-manager, External Secrets);
- ACME servers of cert-manager issuers;
- admission webhooks, CRD conversion webhooks and aggregated APIs: the URL or in-cluster Service they call.
Secrets and ConfigMaps are not scanned: their contents are opaque data, not references.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from drtool.errors import DrtoolError
from drtool.plugin.contract import Dependency, RestoreContext

from .artifacts import records, types_in
from .kubeconfig import load_configuration
from .objects import object_key
from .settings import Connection

UNSCANNED = ("secrets", "configmaps")
VAULT_ANNOTATIONS = ("vault.hashicorp.com/service", "vault.hashicorp.com/address")
DOCKER_HUB = "docker.io"
MAX_EVIDENCE = 3


def registry_host(image: str) -> str:
    """The registry an image reference pulls from (``nginx`` -> docker.io, ``ghcr.io/a/b:1`` -> ghcr.io)."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return DOCKER_HUB


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any, str]]:
    """Every (key, value, parent path) in nested dicts and lists."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k, v, path
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, path)


def _svc(ref: Mapping[str, Any]) -> str:
    port = f":{ref['port']}" if ref.get("port") else ""
    return f"{ref.get('name')}.{ref.get('namespace')}.svc{port}"


def references(obj: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(address, purpose, field) for each reference one object carries."""
    for key, value, parent in _walk(obj):
        if key == "image" and isinstance(value, str) and value and " " not in value:
            yield registry_host(value), "container image registry", f"image {value}"
        elif key in ("vault", "acme") and isinstance(value, dict) and isinstance(value.get("server"), str):
            yield value["server"], f"{'Vault' if key == 'vault' else 'ACME'} server", f"{parent[1:]}.{key}.server"
        elif key == "clientConfig" and isinstance(value, dict):
            if value.get("url"):
                yield value["url"], "webhook URL the API server calls", f"{parent[1:]}.clientConfig.url"
            elif isinstance(value.get("service"), dict):
                purpose = "in-cluster webhook Service the API server calls"
                yield _svc(value["service"]), purpose, f"{parent[1:]}.clientConfig.service"
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    for name in VAULT_ANNOTATIONS:
        if annotations.get(name):
            yield annotations[name], "Vault address", f"annotation {name}"
    if obj.get("kind") == "APIService" and isinstance((obj.get("spec") or {}).get("service"), dict):
        yield _svc(obj["spec"]["service"]), "in-cluster Service of an aggregated API", "spec.service"


def dependencies(ctx: RestoreContext, target: Mapping[str, Any]) -> list[Dependency]:
    deps = [_target_endpoint(target)]
    found: dict[tuple[str, str], list[str]] = {}
    counts: dict[tuple[str, str], int] = {}
    for t in types_in(ctx):
        if t.key in UNSCANNED:
            continue
        for rec in records(ctx, t):
            for address, purpose, field in references(rec["object"]):
                where = found.setdefault((address, purpose), [])
                counts[(address, purpose)] = counts.get((address, purpose), 0) + 1
                if len(where) < MAX_EVIDENCE:
                    where.append(f"{t.key} {object_key(rec['object'])} {field}")
    for ref, where in sorted(found.items()):
        more = f" (+{counts[ref] - len(where)} more)" if counts[ref] > len(where) else ""
        deps.append(Dependency("reference", ref[0], ref[1], "; ".join(where) + more))
    return deps


def _target_endpoint(target: Mapping[str, Any]) -> Dependency:
    try:
        server = load_configuration(Connection.from_mapping(target)).host
    except DrtoolError as exc:
        server = f"(unresolved: {exc.message})"
    purpose = "target Kubernetes API server the objects are applied to"
    return Dependency("endpoint", server, purpose, "target kubeconfig")
