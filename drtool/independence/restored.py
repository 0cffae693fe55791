"""The restored state in a backup, as the strings the reference finder searches (``Field``s).

One reader per artifact format the built-in plugins write (the format is in the artifact's meta, or the
plugin and artifact name for the two that predate it). Each reader knows which parts of its format a
restore writes into the new platform, and leaves out the rest:

- ``ndjson-objects-v1`` (kubernetes, kueue, dns-certs): every string of every object — env, args, command,
  annotations, ConfigMap data, Secret data (base64 decoded), custom resources' specs, volume sources. Left
  out: status (the new cluster's controllers write it), names, labels and selectors (label values),
  ``image`` (the plugin judges registries), free text (descriptions, messages), CRD schemas, the
  last-applied annotation (a copy of the object), Service ClusterIPs and Pod node names (the restore
  drops them);
- ``ndjson-secrets-v1`` (Helm releases): user values, chart default values, the rendered manifest and hooks
  (not templates, files or notes);
- ``dns-zone-v1`` (dns-certs zones): A/AAAA addresses and CNAME/DNAME/NS/MX/SRV targets;
- ``kv2-ndjson`` (Vault KV): every value of every version and the custom metadata;
- model-registry ``registry.json``: version sources and run artifact locations (which its restore
  rewrites: ``Field.rewritten``), run links, tags, run params and tags (not descriptions, ids, metrics);
- files ``files.tar``: every text file under 1 MiB, line by line.

Everything else (etcd snapshots, image blobs, checkpoint data, git bundles, chart archives, raft
snapshots, and the indexes of what was copied) is state a person did not write addresses into: the finder
counts it per plugin as not searched.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import re
import tarfile
from collections.abc import Callable, Iterator
from typing import Any

from drtool.independence.embedded import MAX_DECODED, decoded_text
from drtool.kube.artifacts import ndjson
from drtool.plugin.contract import ArtifactInfo, RestoreContext

OBJECTS, RELEASES, ZONE, KV = "ndjson-objects-v1", "ndjson-secrets-v1", "dns-zone-v1", "kv2-ndjson"
DNS_RECORD = "dns-record"  # the field kind of a zone's record data, whose names are hosts by definition
GZIP_MAGIC = b"\x1f\x8b"
# keys whose string values are never references, wherever they sit
LABEL_KEYS = frozenset({"labels", "matchLabels", "nodeSelector"})
FREE_TEXT = re.compile(r"(^|[./])(description|message|summary|help|notes?|comment|displayName|title|content)$", re.I)
METADATA_KEPT = frozenset({"annotations"})  # of an object's metadata, only annotations are searched
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
DROPPED_BY_RESTORE = {"Service": ("clusterIP", "clusterIPs"), "Pod": ("nodeName",)}  # under spec
# names an object serves or certifies: declarations of the object itself, not references to elsewhere
DECLARED = {
    "Ingress": frozenset({"host", "hosts"}),
    "Certificate": frozenset({"dnsNames", "commonName", "ipAddresses", "uris"}),
    "Gateway": frozenset({"hostname"}),
    "HTTPRoute": frozenset({"hostnames"}),
    "GRPCRoute": frozenset({"hostnames"}),
    "TLSRoute": frozenset({"hostnames"}),
    "DNSEndpoint": frozenset({"dnsName"}),
}
POINTING_RECORDS = frozenset({"A", "AAAA", "CNAME", "DNAME", "NS", "MX", "SRV"})
REWRITTEN_SOURCE = (
    "the model-registry restore copies the version's files to its target's artifact root and points the source there"
)
REWRITTEN_RUN = "the model-registry restore creates the run in its target, which gives it a new artifact location"
SECRET_DATA = ("data", "stringData", "binaryData")


@dataclasses.dataclass(frozen=True)
class Field:
    """One string a restore writes into the new platform, and where it sits."""

    owner: str  # the restored object: "deployments.apps ml/trainer", "helm release apps/web v3", "zone ml.example."
    path: str  # the field inside it: "spec.template.spec.containers[0].env[1].value"
    value: str
    kind: str  # the field kind, as docs/independence.md lists them: env, args, configmap-data, dns-record...
    namespace: str | None = None  # a Kubernetes object's namespace (for one-label Service names)
    sensitive: bool = False  # from a Secret or a sensitive artifact: only addresses may be shown
    rewritten: str = ""  # the plugin's own restore rewrites this field: how (the finding is remediated)


Reader = Callable[[RestoreContext, ArtifactInfo], Iterator[Field]]


def reader_for(plugin: str, art: ArtifactInfo) -> Reader | None:
    """How to read ``art`` of ``plugin``; None for binary state that is not searched."""
    by_format: dict[Any, Reader] = {OBJECTS: _objects, RELEASES: _releases, ZONE: _zone, KV: _kv}
    by_name: dict[tuple[str, str], Reader] = {
        ("model-registry", "registry.json"): _registry,
        ("files", "files.tar"): _files,
    }
    return by_format.get(art.meta.get("format")) or by_name.get((plugin, art.name))


# --- walking a document ------------------------------------------------------------------------------


def strings(value: Any, path: str = "", skip: frozenset[str] = frozenset()) -> Iterator[tuple[str, str, str]]:
    """(path, key, text) of every string in nested dicts and lists; label maps, free text and the keys in
    ``skip`` left out."""
    stack: list[tuple[str, str, Any]] = [(path, "", value)]
    while stack:
        where, key, item = stack.pop()
        if isinstance(item, str):
            if ":" in item or "." in item:
                yield where, key, item
        elif isinstance(item, dict):
            for k, v in item.items():
                k = str(k)
                if k in LABEL_KEYS or k in skip or FREE_TEXT.search(k) or k == LAST_APPLIED:
                    continue
                stack.append((_child(where, k), k, v))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", key, v) for i, v in enumerate(item))


def _child(path: str, key: str) -> str:
    if key.replace("_", "a").replace("-", "a").isalnum():
        return f"{path}.{key}" if path else key
    return f'{path}["{key}"]'


# --- Kubernetes objects ------------------------------------------------------------------------------


def _objects(ctx: RestoreContext, art: ArtifactInfo) -> Iterator[Field]:
    group, resource = art.meta.get("group") or "", art.meta.get("resource", "")
    type_key = f"{resource}.{group}" if group else resource
    for record in ndjson(ctx, art.name):
        yield from object_fields(record.get("object") or {}, type_key)


def object_fields(obj: dict[str, Any], type_key: str) -> Iterator[Field]:
    """The searchable fields of one Kubernetes object as the restore writes it."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    owner = f"{type_key} {ns}/{meta.get('name')}" if ns else f"{type_key} {meta.get('name')}"
    kind = obj.get("kind", "")
    secret = kind == "Secret"
    dropped = DROPPED_BY_RESTORE.get(kind, ())
    declared = DECLARED.get(kind, frozenset())
    for top, value in obj.items():
        if top in ("apiVersion", "kind", "status") or (top == "spec" and kind == "CustomResourceDefinition"):
            continue
        if top == "metadata":
            value = {k: v for k, v in value.items() if k in METADATA_KEPT}
        elif top == "spec" and dropped and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in dropped}
        elif secret and top == "data" and isinstance(value, dict):
            value = {k: text for k, v in value.items() if isinstance(v, str) and (text := decoded_text(v))}
        for path, key, text in strings(value, top, declared):
            if key == "image":
                continue
            yield Field(owner, path, text, _kube_kind(kind, path), ns, secret)


def _kube_kind(kind: str, path: str) -> str:
    if path.startswith("metadata.annotations"):
        return "annotation"
    if kind in ("ConfigMap", "Secret") and path.split(".", 1)[0].split("[", 1)[0] in SECRET_DATA:
        return "configmap-data" if kind == "ConfigMap" else "secret-data"
    for part, name in ((".env[", "env"), (".args[", "args"), (".command[", "command")):
        if part in path:
            return name
    return "spec"


# --- Helm releases -----------------------------------------------------------------------------------


def _releases(ctx: RestoreContext, art: ArtifactInfo) -> Iterator[Field]:
    for secret in ndjson(ctx, art.name):
        release = helm_release(secret)
        if release is None:
            continue
        owner = f"helm release {release.get('namespace')}/{release.get('name')} v{release.get('version')}"
        chart = release.get("chart") or {}
        parts = [("config", release.get("config"), "helm-values"), ("chart.values", chart.get("values"), "helm-values")]
        parts.append(("manifest", release.get("manifest"), "helm-manifest"))
        hooks = enumerate(release.get("hooks") or [])
        parts += [(f"hooks[{i}].manifest", hook.get("manifest"), "helm-manifest") for i, hook in hooks]
        for where, value, kind in parts:
            for path, _key, text in strings(value, where):
                yield Field(owner, path, text, kind, release.get("namespace"), True)


def helm_release(secret: dict[str, Any]) -> dict[str, Any] | None:
    """The release in a Helm storage Secret (``data.release``: base64 of base64(gzip(JSON)), as Helm
    writes it; read here rather than imported from the helm plugin, so the core depends on no plugin)."""
    try:
        raw = base64.b64decode(base64.b64decode((secret.get("data") or {})["release"]))
        return json.loads(gzip.decompress(raw) if raw[:2] == GZIP_MAGIC else raw)
    except (KeyError, TypeError, ValueError, OSError):
        return None


# --- DNS zones, Vault KV, the model registry, files -----------------------------------------------------


def _zone(ctx: RestoreContext, art: ArtifactInfo) -> Iterator[Field]:
    owner = f"zone {art.meta.get('zone', art.name)}"
    with ctx.open(art.name) as src:
        for number, line in enumerate(src.read().decode().splitlines(), 1):
            fields = line.split(None, 4)
            if len(fields) == 5 and fields[3] in POINTING_RECORDS:
                name, _ttl, _cls, rdtype, rdata = fields
                target = rdata.split()
                host = target[-1].rstrip(".")
                value = f"{host}:{target[-2]}" if rdtype == "SRV" and len(target) == 4 else host
                yield Field(owner, f"line {number} ({name} {rdtype})", value, DNS_RECORD)


def _kv(ctx: RestoreContext, art: ArtifactInfo) -> Iterator[Field]:
    mount = art.meta.get("mount", art.name)
    for i, line in enumerate(ndjson(ctx, art.name)):
        if i == 0:
            continue  # the mount's header: its options and configuration, not secrets
        owner = f"vault kv {mount}/{line.get('path')}"
        custom = (line.get("metadata") or {}).get("custom_metadata")
        for path, _key, text in strings(custom, "custom_metadata"):
            yield Field(owner, path, text, "vault-kv", sensitive=True)
        for version in line.get("versions") or []:
            for path, _key, text in strings(version.get("data"), f"v{version.get('version')}.data"):
                yield Field(owner, path, text, "vault-kv", sensitive=True)


def _registry(ctx: RestoreContext, art: ArtifactInfo) -> Iterator[Field]:
    with ctx.open(art.name) as src:
        document = json.loads(b"".join(iter(src)))
    for model in document.get("models") or []:
        owner = f"registered model {model.get('name')}"
        yield from _fields(owner, "tags", model.get("tags"), "mlflow-tag")
        for mv in model.get("versions") or []:
            version = f"{owner} version {mv.get('version')}"
            for key in ("source", "resolved"):
                yield from _fields(version, key, mv.get(key), "mlflow-source", REWRITTEN_SOURCE)
            yield from _fields(version, "run_link", mv.get("run_link"), "mlflow-link")
            yield from _fields(version, "tags", mv.get("tags"), "mlflow-tag")
    for run_id, run in (document.get("runs") or {}).items():
        owner = f"run {run_id}"
        yield from _fields(owner, "artifact_uri", (run or {}).get("artifact_uri"), "mlflow-source", REWRITTEN_RUN)
        for key in ("params", "tags"):
            yield from _fields(owner, key, (run or {}).get(key), f"mlflow-run-{key}")


def _fields(owner: str, where: str, value: Any, kind: str, rewritten: str = "") -> Iterator[Field]:
    for path, _key, text in strings(value, where):
        yield Field(owner, path, text, kind, rewritten=rewritten)


def _files(ctx: RestoreContext, art: ArtifactInfo) -> Iterator[Field]:
    with ctx.open(art.name) as src, tarfile.open(fileobj=src, mode="r|") as tar:  # type: ignore[call-overload]
        for member in tar:
            if not member.isfile() or member.size > MAX_DECODED:
                continue
            handle = tar.extractfile(member)
            try:
                text = handle.read().decode("utf-8") if handle else ""
            except UnicodeDecodeError:
                continue
            if text and "\x00" not in text:
                yield Field(f"file {member.name}", "", text, "file", sensitive=True)
