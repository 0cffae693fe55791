"""An OCI distribution registry (``github.com/distribution/distribution/v3``, built in ``gomod/lab``) on a
loopback port.

The images and helm plugins copy images, OCI artifacts and charts between registries over the distribution
API, so tests and rehearsals need a real registry that checks digests, stores blobs by content and serves
manifests by digest and tag, not a fake. Each instance gets its own config file and filesystem storage in
the component's folder; deletes are enabled so tests can remove what they pushed. It speaks plain HTTP on
127.0.0.1 (clients treat loopback registries as insecure, as ``docker`` and ``skopeo`` do). With ``auth``,
it asks for a user and password (htpasswd, bcrypt), generated once and kept in the component's state like
MinIO's root credentials. The binary is distribution's own ``registry`` command with only the filesystem
and in-memory storage drivers and htpasswd auth linked in (docs/lab-builds.md); its OpenTelemetry trace
export is turned off (it would otherwise try an OTLP collector on localhost).
"""

from __future__ import annotations

import dataclasses
import secrets
import urllib.error
import urllib.request

from drtool_lab.gomods import lab_binary

from drtool.servers import process
from drtool.servers.component import Component


@dataclasses.dataclass
class RegistryServer(Component):
    """The registry on a free loopback port with filesystem storage under the component's folder."""

    kind = "registry"
    binaries = ("registry",)
    port: int = 0
    auth: bool = False
    access_log: bool = False  # one line per request in the log: what a test counts (uploads, HEADs)
    username: str = ""
    password: str = ""

    def __post_init__(self) -> None:
        self.port = self.port or process.free_port()
        if self.auth:
            self.username = self.username or f"lab-{secrets.token_hex(4)}"
            self.password = self.password or secrets.token_urlsafe(18)

    @property
    def host(self) -> str:
        """``127.0.0.1:PORT``: the registry part of an image reference pushed here."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    @property
    def config_path(self) -> str:
        return str(self.path / "config.yml")

    def write_config(self) -> None:
        storage = self.path / "storage"
        storage.mkdir(parents=True, exist_ok=True)
        auth = ""
        if self.auth:
            htpasswd = self.path / "htpasswd"
            htpasswd.touch(mode=0o600)
            htpasswd.write_text(f"{self.username}:{_bcrypt(self.password)}\n")
            auth = f"auth:\n  htpasswd:\n    realm: drtool-lab\n    path: {htpasswd}\n"
        (self.path / "config.yml").write_text(
            "version: 0.1\n"
            f"log:\n  level: warn\n  accesslog:\n    disabled: {str(not self.access_log).lower()}\n"
            "storage:\n"
            f"  filesystem:\n    rootdirectory: {storage}\n"
            "  delete:\n    enabled: true\n"
            f"http:\n  addr: {self.host}\n" + auth
        )

    def start(self, timeout: float = 30.0) -> None:
        binary = lab_binary("registry")  # may build first (minutes): before the health-check clock starts
        self.write_config()
        env = {"OTEL_TRACES_EXPORTER": "none", "OTEL_SDK_DISABLED": "true"}
        self.pid = process.spawn([str(binary), "serve", self.config_path], self.log_path, env=env)
        process.wait_until(self.healthy, timeout, f"registry {self.name} at {self.url}", self.log_path)

    def healthy(self) -> bool:
        if not self.running():
            return False
        try:  # /v2/ answers 401 when auth is on: a challenge is a healthy answer too
            with urllib.request.urlopen(f"{self.url}/v2/", timeout=2):
                return True
        except urllib.error.HTTPError as exc:
            return exc.code == 401
        except OSError:
            return False

    def env(self) -> dict[str, str]:
        return {f"DRTOOL_LAB_REGISTRY_{self.name.upper().replace('-', '_')}": self.host}

    def describe(self) -> str:
        return self.url + (" (auth)" if self.auth else "")


def _bcrypt(password: str) -> str:
    """A bcrypt hash for htpasswd, from the system's crypt(3) (libxcrypt), which the registry accepts."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # crypt leaves the stdlib in 3.13
        import crypt

        # cost 4, not the default 12: the registry checks the hash on every request, and this is a lab password
        return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))
