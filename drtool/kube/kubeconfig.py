"""Reading a kubeconfig (or the in-cluster service account) into what an HTTP client needs.

The ``kubernetes`` package does the reading — certificates inline or in files, tokens, exec and OIDC
plugins, contexts — and this module turns its ``Configuration`` into an ``ssl.SSLContext`` (built once,
so connections do not re-read PEM files) and a proxy URL. The package is imported when a kubeconfig is
first read, not with this module: it costs about half a second, which every CLI call would otherwise pay.
"""

from __future__ import annotations

import os
import ssl
import urllib.request
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from drtool.errors import UsageError

from .settings import Connection

if TYPE_CHECKING:
    from kubernetes import client as k8s_client


def load_configuration(conn: Connection) -> k8s_client.Configuration:
    """A kubeconfig (explicit, $KUBECONFIG or ~/.kube/config), else the in-cluster service account."""
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    cfg = k8s_client.Configuration()
    path = conn.kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    first = path.split(os.pathsep)[0] if path else ""
    try:
        if first and os.path.exists(first):
            k8s_config.load_kube_config(
                config_file=first, context=conn.context, client_configuration=cfg, persist_config=False
            )
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=cfg)
        else:
            raise UsageError(f"no kubeconfig at {first or '(unset)'}", "set `kubeconfig` or KUBECONFIG")
    except k8s_config.ConfigException as exc:
        raise UsageError(f"cannot load kubeconfig {first}: {exc}", "check the file and `context`") from None
    return cfg


def ssl_context(cfg: k8s_client.Configuration) -> ssl.SSLContext:
    """Server verification with the kubeconfig's CA (or the system's), and its client certificate."""
    if cfg.verify_ssl:
        ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
    else:  # insecure-skip-tls-verify: the kubeconfig's owner chose it
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
    return ctx


def proxy_url(cfg: k8s_client.Configuration, server: str) -> str | None:
    """The kubeconfig's proxy-url, else HTTPS_PROXY/NO_PROXY from the environment (as kubectl does)."""
    if cfg.proxy:
        return cfg.proxy
    host = urlsplit(server).hostname or ""
    proxies = urllib.request.getproxies()
    if not proxies or urllib.request.proxy_bypass(host):
        return None
    return proxies.get(urlsplit(server).scheme) or proxies.get("all")
