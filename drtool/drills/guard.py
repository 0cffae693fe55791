"""A drill breaks something on purpose: it runs only against a lab, or a cluster the operator names and approves.

A lab here is an API server on this machine (a loopback address: drtool's lab, kind, k3d). Any other cluster
is refused unless ``named`` equals its API server's host and ``approved`` is set, so neither a wrong current
kubeconfig context nor a forgotten flag can inject a failure into production.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from drtool.errors import UsageError

LOCAL_NAMES = ("localhost",)


def is_lab(server: str) -> bool:
    host = urlsplit(server).hostname or ""
    if host in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def allow(server: str, named: str | None, approved: bool) -> str:
    """The host the drill may break; UsageError when it may not."""
    host = urlsplit(server).hostname or server
    if is_lab(server):
        return host
    if named != host:
        raise UsageError(
            f"refusing to drill {host}: not a lab",
            f"name it with --cluster {host} and add --approve to inject a failure there",
        )
    if not approved:
        raise UsageError(f"refusing to drill {host}: named but not approved", "add --approve")
    return host
