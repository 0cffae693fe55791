"""Admission webhooks and aggregated APIs: part of a platform's installation, not of its state.

A webhook configuration (or an APIService) names the endpoint of one installation of an operator — a
Service or a URL — and the CA that installation generated (``caBundle``). A cluster rebuilt for a restore
installs its platform first (Kueue, cert-manager, a metrics server: from Helm or GitOps), and that install
registers its own configurations, with its own endpoint and CA. The old cluster's copy would point the new
API server at an endpoint that does not exist or present a CA that signs nothing there: with
``failurePolicy: Fail`` every create the webhook intercepts would fail.

So (option ``webhooks: keep``, the default) a configuration the target already has is left exactly as the
target's install made it; one it lacks is restored, last (``order.py``), because then the backup is the only
place it exists. Verify does not compare these objects with the backup; it checks what matters: each one the
backup names is present, and each webhook the target's API server will call answers — a TLS handshake with
the configuration's own CA for a URL, the Service present for an in-cluster one — and each aggregated API is
``Available``. ``webhooks: restore`` applies the backup's copies like any object.
"""

from __future__ import annotations

import base64
import socket
import ssl
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from drtool.plugin.contract import Check, RestoreContext

from .artifacts import records
from .client import ApiError, KubeClient
from .discovery import ResourceType
from .objects import object_key

WEBHOOK_CONFIGURATIONS = (
    "mutatingwebhookconfigurations.admissionregistration.k8s.io",
    "validatingwebhookconfigurations.admissionregistration.k8s.io",
)
APISERVICES = "apiservices.apiregistration.k8s.io"
INSTALLED = (*WEBHOOK_CONFIGURATIONS, APISERVICES)
PROBE_TIMEOUT = 3.0
MAX_LISTED = 5
Obj = dict[str, Any]


def kept(t: ResourceType, policy: str) -> bool:
    """Whether existing objects of ``t`` are the target's own install's (left alone by the restore)."""
    return policy == "keep" and t.key in INSTALLED


def check_installed(ctx: RestoreContext, client: KubeClient, t: ResourceType) -> Check:
    """Present, and answering: what the target's API server will call for each object the backup names."""
    total, absent, kept_own, problems = 0, [], 0, []
    for rec in records(ctx, t):
        total += 1
        name = object_key(rec["object"])
        try:
            live = client.get(t.path(None, name))
        except ApiError as exc:
            if exc.status != 404:
                raise
            absent.append(name)
            continue
        kept_own += _spec(live) != _spec(rec["object"])
        problems += [f"{name}: {p}" for p in (_apiservice(live) if t.key == APISERVICES else _webhooks(client, live))]
    ok = not absent and not problems
    lines = [f"{total} in backup, {total - len(absent)} in target, {kept_own} of them the target's own install"]
    if absent:
        lines.append(f"missing: {', '.join(absent[:MAX_LISTED])}")
    lines += problems[:MAX_LISTED]
    if ok:
        lines.append("every endpoint the API server calls answers" if t.key != APISERVICES else "every API Available")
    return Check(f"kubernetes: {t.key}", ok, "\n".join(lines))


def _spec(obj: Mapping[str, Any]) -> Any:
    return obj.get("webhooks") if "webhooks" in obj else obj.get("spec")


def _apiservice(live: Obj) -> list[str]:
    if not (live.get("spec") or {}).get("service"):
        return []
    available = next((c for c in (live.get("status") or {}).get("conditions") or [] if c.get("type") == "Available"),
                     {})  # fmt: skip
    if available.get("status") == "True":
        return []
    return [f"not Available: {available.get('reason', 'no condition yet')} {available.get('message', '')}".strip()]


def _webhooks(client: KubeClient, live: Obj) -> Iterator[str]:
    for hook in live.get("webhooks") or []:
        config = hook.get("clientConfig") or {}
        why = _probe_url(config) if config.get("url") else _service_present(client, config.get("service") or {})
        if why:
            policy = hook.get("failurePolicy", "Fail")
            effect = "blocks what it intercepts" if policy == "Fail" else "ignored (failurePolicy Ignore)"
            yield f"webhook {hook.get('name')}: {why}; {effect}"


def _probe_url(config: Mapping[str, Any]) -> str | None:
    """None when a TLS handshake with the configuration's own CA (or the system's) succeeds."""
    url = urlsplit(config["url"])
    host, port = url.hostname or "", url.port or 443
    context = ssl.create_default_context()
    if config.get("caBundle"):
        context = ssl.create_default_context(cadata=base64.b64decode(config["caBundle"]).decode())
    try:
        with (
            socket.create_connection((host, port), timeout=PROBE_TIMEOUT) as sock,
            context.wrap_socket(sock, server_hostname=host),
        ):
            return None
    except ssl.SSLError as exc:
        return f"{config['url']} does not present a certificate its caBundle signs ({exc.reason})"
    except OSError as exc:
        return f"{config['url']} does not answer ({exc.strerror or exc})"


def _service_present(client: KubeClient, service: Mapping[str, Any]) -> str | None:
    """An in-cluster Service cannot be dialled from here: it must at least exist."""
    path = f"/api/v1/namespaces/{service.get('namespace')}/services/{service.get('name')}"
    try:
        client.get(path)
    except ApiError as exc:
        if exc.status == 404:
            return f"Service {service.get('namespace')}/{service.get('name')} does not exist"
        raise
    return None
