"""An authoritative DNS server: Debian's bind9 (``/usr/sbin/named``) in the foreground on a loopback port.

Each zone is a primary zone that accepts AXFR and RFC 2136 updates only when signed with the lab's TSIG
key (HMAC-SHA256, a fresh random secret per server, written to a 0600 key file in BIND's own ``key``
syntax, never to the state file or argv). A zone whose file does not exist yet is created minimal (SOA and
one NS), so an empty lab is a valid restore target; a zone file placed in ``zones/`` before the first
start (a zone-file restore) is served as it is.

Why named runs as root here: in the lab its files live in the component folder (under root's 0700 test
temp dirs when CI runs as root), which the ``bind`` user could not enter; it only binds loopback ports.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import secrets
import shutil
from pathlib import Path

from drtool.errors import SourceError
from drtool.servers import process
from drtool.servers.component import Component
from drtool.servers.provision import Provision, debian

NAMED = "named"
KEY_ALGORITHM = "hmac-sha256"
MINIMAL_ZONE = """$TTL 300
@ IN SOA ns1.{zone}. hostmaster.{zone}. 1 3600 600 604800 300
@ IN NS ns1.{zone}.
ns1 IN A 127.0.0.1
"""


def named_binary() -> str:
    found = shutil.which(NAMED) or ("/usr/sbin/named" if os.path.exists("/usr/sbin/named") else None)
    if not found:
        raise SourceError("bind9's named not found", "apt-get install bind9")
    return found


@dataclasses.dataclass
class Bind9Server(Component):
    """bind9 on 127.0.0.1:``port`` serving ``zones`` (names without the trailing dot), TSIG key ``key_name``."""

    kind = "bind9"

    @classmethod
    def provisions(cls) -> list[Provision]:
        return [debian("named", "bind9", named_binary, service="named")]  # the lab runs its own named

    port: int = 0
    zones: list[str] = dataclasses.field(default_factory=lambda: ["ml.example.com"])
    key_name: str = "drtool-lab"

    def __post_init__(self) -> None:
        self.port = self.port or process.free_port()
        self.zones = [z.rstrip(".") for z in self.zones]

    @property
    def key_file(self) -> Path:
        return self.path / "tsig.key"

    @property
    def zone_dir(self) -> Path:
        return self.path / "zones"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def zone_file(self, zone: str) -> Path:
        return self.zone_dir / f"{zone.rstrip('.')}.zone"

    def _write_key(self) -> None:
        if self.key_file.exists():
            return
        secret = base64.b64encode(secrets.token_bytes(32)).decode()
        fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f'key "{self.key_name}" {{\n\talgorithm {KEY_ALGORITHM};\n\tsecret "{secret}";\n}};\n')

    def _write_config(self) -> Path:
        zones = "".join(
            f'zone "{z}" {{ type primary; file "{self.zone_file(z)}"; '
            f"allow-transfer {{ key {self.key_name}; }}; allow-update {{ key {self.key_name}; }}; }};\n"
            for z in self.zones
        )
        conf = self.path / "named.conf"
        conf.write_text(
            f'include "{self.key_file}";\n'
            "options {\n"
            f'\tdirectory "{self.path}";\n'
            f'\tpid-file "{self.path / "named.pid"}";\n'
            f'\tsession-keyfile "{self.path / "session.key"}";\n'
            f'\tmanaged-keys-directory "{self.path}";\n'
            f"\tlisten-on port {self.port} {{ 127.0.0.1; }};\n"
            "\tlisten-on-v6 { none; };\n"
            "\trecursion no;\n"
            "\tdnssec-validation no;\n"
            "\tallow-query { any; };\n"
            "\tnotify no;\n"
            "};\n"
            "controls { };\n" + zones
        )
        return conf

    def start(self, timeout: float = 30.0) -> None:
        binary = named_binary()
        self.zone_dir.mkdir(parents=True, exist_ok=True)
        self._write_key()
        for zone in self.zones:
            if not self.zone_file(zone).exists():
                self.zone_file(zone).write_text(MINIMAL_ZONE.format(zone=zone))
        conf = self._write_config()
        # -g: foreground, log to stderr (the component log); -4: loopback IPv4 only
        self.pid = process.spawn([binary, "-g", "-4", "-c", str(conf)], self.log_path, cwd=self.path)
        process.wait_until(self.healthy, timeout, f"bind9 {self.name} on {self.address}", self.log_path)

    def healthy(self) -> bool:
        """An answer (any rcode) to an SOA query for the first zone over UDP."""
        if not self.running():
            return False
        import dns.exception
        import dns.message
        import dns.query

        query = dns.message.make_query(f"{self.zones[0] if self.zones else '.'}.", "SOA")
        try:
            dns.query.udp(query, "127.0.0.1", port=self.port, timeout=1.0)
        except (dns.exception.DNSException, OSError):
            return False
        return True

    def env(self) -> dict[str, str]:
        return {"DRTOOL_LAB_DNS_SERVER": self.address, "DRTOOL_LAB_DNS_TSIG_KEY_FILE": str(self.key_file)}

    def describe(self) -> str:
        return f"dns://{self.address} zones {', '.join(self.zones)} (TSIG key {self.key_name})"
