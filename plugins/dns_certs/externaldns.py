"""ExternalDNS: its registry settings (the TXT owner id above all), and holding it at ``upsert-only``.

A restored ExternalDNS in its usual ``--policy=sync`` deletes every record it owns (same ``--txt-owner-id``)
whose source object is not in the new cluster yet; during a restore that is most of them. Held at
``upsert-only`` it only creates and updates, so the zones stay whole while the rest of the platform comes
back; ``release`` then puts the backed-up policy back. The policy it had is kept in an annotation on the
Deployment, so a release needs nothing but the target cluster.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from drtool.kube.client import KubeClient
from drtool.kube.objects import dumps

Obj = dict[str, Any]
HELD = "dns-certs.drtool.dev/held-policy"  # annotation: the policy to release to
UPSERT_ONLY = "upsert-only"
DEFAULT_POLICY = "sync"  # ExternalDNS's default when --policy is absent
STRATEGIC = "application/strategic-merge-patch+json"
_SINGLE = ("--txt-owner-id", "--policy", "--registry", "--txt-prefix", "--txt-suffix", "--provider")
_MULTI = ("--source", "--domain-filter")


def settings(deployment: Obj) -> dict[str, Any]:
    """What a restore must keep to take over the old records: owner id, policy, registry, sources..."""
    out: dict[str, Any] = {"deployment": f"{deployment['metadata']['namespace']}/{deployment['metadata']['name']}"}
    for container in _containers(deployment):
        for flag, value in _flags(container.get("args") or []):
            key = flag.lstrip("-").replace("-", "_")
            if flag in _MULTI:
                out.setdefault(key + "s", []).append(value)
            elif flag in _SINGLE:
                out[key] = value
    out.setdefault("policy", DEFAULT_POLICY)
    out.setdefault("registry", "txt")
    return out


def _containers(deployment: Obj) -> list[Obj]:
    return deployment["spec"]["template"]["spec"]["containers"]


def _flags(args: list[str]) -> Iterator[tuple[str, str]]:
    """``--flag=value`` and ``--flag value`` pairs."""
    i = 0
    while i < len(args):
        arg = str(args[i])
        if arg.startswith("--") and "=" in arg:
            flag, value = arg.split("=", 1)
            yield flag, value
        elif arg.startswith("--") and i + 1 < len(args) and not str(args[i + 1]).startswith("--"):
            yield arg, str(args[i + 1])
            i += 1
        i += 1


def with_policy(args: list[str], policy: str) -> list[str]:
    """``args`` with ``--policy`` set to ``policy`` (either spelling replaced, or the flag appended)."""
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg.startswith("--policy="):
            continue
        if arg == "--policy" and i + 1 < len(args):
            skip = True
            continue
        out.append(arg)
    return [*out, f"--policy={policy}"]


def hold(deployment: Obj) -> Obj:
    """The Deployment with every ExternalDNS container at ``upsert-only`` and its own policy recorded."""
    held = copy.deepcopy(deployment)
    policy = settings(deployment)["policy"]
    for c in _containers(held):
        if c.get("args") is not None:
            c["args"] = with_policy(c["args"], UPSERT_ONLY)
    held["metadata"].setdefault("annotations", {})[HELD] = policy
    return held


def release(client: KubeClient) -> list[str]:
    """Put every held ExternalDNS Deployment back to its recorded policy; returns ``ns/name: policy`` lines."""
    released = []
    for page in client.list_pages("/apis/apps/v1/deployments"):
        for dep in page.get("items") or []:
            policy = (dep["metadata"].get("annotations") or {}).get(HELD)
            if not policy:
                continue
            containers = [
                {"name": c["name"], "args": with_policy(c["args"], policy)}
                for c in _containers(dep)
                if c.get("args") is not None
            ]
            patch = {
                "metadata": {"annotations": {HELD: None}},
                "spec": {"template": {"spec": {"containers": containers}}},
            }
            ns, name = dep["metadata"]["namespace"], dep["metadata"]["name"]
            path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
            client.request("PATCH", path, params={"fieldManager": "drtool"}, body=dumps(patch), content_type=STRATEGIC)
            released.append(f"{ns}/{name}: {policy}")
    return released


def held(client: KubeClient) -> list[str]:
    """Deployments still held (``ns/name``)."""
    return [
        f"{d['metadata']['namespace']}/{d['metadata']['name']}"
        for page in client.list_pages("/apis/apps/v1/deployments")
        for d in page.get("items") or []
        if HELD in (d["metadata"].get("annotations") or {})
    ]
