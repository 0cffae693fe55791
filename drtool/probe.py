"""Whether something accepts a TCP connection at an address: a failover's "is the primary still up?" and a
drill's "is the store down yet?" ask the same question, and neither may send credentials to find out."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit


def reachable(endpoint: str, timeout: float = 3.0) -> bool:
    """``endpoint`` is a URL (``https://host:6443``) or ``host:port``; nothing is sent once connected."""
    parts = urlsplit(endpoint if "://" in endpoint else f"tcp://{endpoint}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout):
            return True
    except OSError:
        return False
