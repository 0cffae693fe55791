"""The dns-certs plugin: what keeps a restored platform's names and certificates, and what still points back.

- cert-manager Issuers, ClusterIssuers, Certificates and every Secret they name (key pairs, CA Secrets,
  ACME account keys, DNS01 solver credentials); Secrets are restored before Certificates, with the
  Certificates' status, so cert-manager re-issues nothing; each certificate's expiry is reported and
  those ending within the RTO plus a margin are warned about. Orders, Challenges and CertificateRequests
  are left out (``kinds.NOT_BACKED_UP`` says why).
- CoreDNS's Corefile and the kube-dns Service with its ClusterIP; ExternalDNS's DNSEndpoints and
  Deployment (owner id kept), optionally held at ``upsert-only`` until released.
- Authoritative zones by AXFR (TSIG), restored as zone files and/or by RFC 2136 updates, verified by SOA
  serial and exact RRsets.
- The DNS cut-over list: every record (zones, DNSEndpoints) that points at a LoadBalancer Service's or
  an Ingress's address, in the manifest meta and as ``reference`` dependencies.

Source: ``kubeconfig``, ``context``, ``kubernetes`` (true), ``dns_server`` (host:port), ``zones``,
``tsig_key_file``, ``cluster_resource_namespace`` (cert-manager). Target: ``kubeconfig``, ``dns_server``,
``tsig_key_file``, ``zone_dir``. Options: ``externaldns`` (keep|hold|release), ``rto``, ``expiry_margin``
(14d), ``dry_run`` and the kubernetes plugin's (``existing``, ``workers``...). docs/dns-certs.md explains each.
"""

from __future__ import annotations

from collections.abc import Sequence

from drtool.plugin.checks import PlatformCheck
from drtool.plugin.contract import BasePlugin

from . import backup as _backup
from . import deps as _deps
from . import restore as _restore
from . import verify as _verify
from .schema import SCHEMA

__all__ = ["DnsCertsPlugin"]


class DnsCertsPlugin(BasePlugin):
    """Implements ``drtool.plugin.contract.Plugin`` for DNS and certificates."""

    name = "dns-certs"
    description = "cert-manager certificates and their Secrets, CoreDNS, ExternalDNS, DNS zones (AXFR/RFC 2136)"
    schema = SCHEMA
    discover = staticmethod(_backup.discover_inventory)
    backup = staticmethod(_backup.backup)
    restore = staticmethod(_restore.run_restore)
    verify = staticmethod(_verify.run_verify)
    dependencies = staticmethod(_deps.dependencies)

    def platform_checks(self) -> Sequence[PlatformCheck]:
        """``no-reissue``: restored Certificates are Ready and cert-manager issues none of them again."""
        from . import reissue_check

        return (reissue_check.CHECK,)
