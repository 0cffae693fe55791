"""The repository's Containerfile, built for real with no network, pushed to a registry, pulled back into
empty storage and run as its non-root user (how it is built here: tests/fixtures/image.py).

What this proves: the Containerfile builds from nothing but its pinned inputs; the image's dependencies are
complete without the lab and test extras (every built-in plugin loads, and a real encrypted backup and a
full check run inside it); the pushed image runs as uid 65532 through its own entrypoint; a usage error is
typer's usage message and exit 2, not a traceback. About 1 minute on 2 cores with the caches warm (the
dependency layers reused: tests/fixtures/image.py, ``layer_cache``), 2.5 when the pins change, 4 cold (the
Debian and PyPI downloads, which tests/run.sh does beforehand).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import yaml

from drtool import __version__
from drtool.backends import open_backend
from drtool.crypto.credentials import Credentials
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE
from tests.fixtures.image import Buildah, build_image, layer_cache, missing_tools
from tests.fixtures.registry import RegistryLab, start_registry

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="buildah and mmdebstrap build images as root here"),
    pytest.mark.skipif(bool(missing_tools()), reason=f"not installed: {missing_tools()} (tests/run.sh installs them)"),
    pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the wheelhouse is this Python's; the base has 3.11"),
]

REPOSITORY = "drtool"
TAG = __version__
UID = "65532"
Result = tuple[int, str, str]  # exit code, stdout, stderr


@dataclasses.dataclass
class Pulled:
    """The image as a cluster would get it: pulled from the registry into storage that never built it."""

    buildah: Buildah
    container: str
    config: dict  # the OCI image config's "config" object: User, Entrypoint, Env, ...
    reference: str

    def exec(self, *command: str, volumes: tuple[str, ...] = (), env: dict[str, str] | None = None) -> Result:
        """``command`` in the container as the image's user, without network."""
        options = [f"--volume={v}" for v in volumes] + [f"--env={k}={v}" for k, v in (env or {}).items()]
        user = f"--user={self.config['User']}"
        proc = self.buildah.offline("run", "--isolation=chroot", user, *options, self.container, "--", *command)
        return proc.returncode, proc.stdout, proc.stderr

    def run(self, *args: str, volumes: tuple[str, ...] = (), env: dict[str, str] | None = None) -> Result:
        """The image's entrypoint with ``args``."""
        return self.exec(*self.config["Entrypoint"], *args, volumes=volumes, env=env)


@pytest.fixture(scope="module")
def registry(lab_root: Path) -> Iterator[RegistryLab]:
    reg = start_registry(lab_root, "reg-image")
    yield reg
    reg.lab.down()


@pytest.fixture(scope="module")
def pushed(tmp_path_factory: pytest.TempPathFactory, registry: RegistryLab) -> Iterator[str]:
    """Build the Containerfile offline and push the result; yields its reference in the lab registry."""
    work = tmp_path_factory.mktemp("image-build")
    with layer_cache() as builder:
        built = build_image(builder, "localhost/drtool:test", work)
        assert built.returncode == 0, built.stderr[-3000:]
        reference = f"{registry.host}/{REPOSITORY}:{TAG}"
        builder("push", "--tls-verify=false", "localhost/drtool:test", f"docker://{reference}")
    yield reference


@pytest.fixture(scope="module")
def pulled(tmp_path_factory: pytest.TempPathFactory, pushed: str) -> Iterator[Pulled]:
    buildah = Buildah(tmp_path_factory.mktemp("image-pull") / "buildah")
    try:
        container = buildah("from", "--tls-verify=false", f"docker://{pushed}")
        config = json.loads(buildah("inspect", "--type", "image", pushed))["OCIv1"]["config"]
        yield Pulled(buildah, container, config, pushed)
    finally:
        buildah.remove_all()


def test_pushed_image_is_pinned_non_root_and_runs_drtool(pushed: str, registry: RegistryLab) -> None:
    # read back through the registry's API with drtool's own OCI client, not the tool that pushed it
    client = registry.client()
    raw, media_type, digest = client.manifest(REPOSITORY, TAG)
    manifest = json.loads(raw)
    assert media_type == "application/vnd.oci.image.manifest.v1+json" and digest.startswith("sha256:")
    config = json.loads(b"".join(client.blob(REPOSITORY, manifest["config"]["digest"])))
    assert config["config"]["User"] == f"{UID}:{UID}"  # numeric, so runAsNonRoot can verify it
    assert config["config"]["Entrypoint"] == ["drtool"]
    env = dict(e.split("=", 1) for e in config["config"]["Env"])
    assert env["HOME"] == "/var/lib/drtool" and env["PATH"].startswith("/opt/drtool/bin:")
    sizes = ", ".join(f"{layer['size'] / 2**20:.1f}" for layer in manifest["layers"])
    print(f"\nimage {pushed}: layers of {sizes} MiB compressed (the first is the stand-in base)")


def test_entrypoint_runs_as_non_root_with_every_plugin(pulled: Pulled) -> None:
    code, out, err = pulled.run("version")
    assert (code, out.strip()) == (0, __version__), err
    code, out, err = pulled.run("plugins", "--json")
    assert code == 0, err
    listed = {p["name"]: p for p in json.loads(out)}
    built_in = {ep.name for ep in entry_points(group="drtool.plugins") if ep.value.startswith("drtool_plugins.")}
    assert built_in <= listed.keys()
    assert not [p for p in listed.values() if "error" in p], out  # git included: the git plugin loads too
    # the user the entrypoint runs as, seen from inside
    code, out, err = pulled.exec("id", "-u")
    assert (code, out.strip()) == (0, UID), err


def test_the_image_has_no_lab(pulled: Pulled) -> None:
    """The lab (lab/, drtool_lab) stays outside the product: no package, no lab commands. `rehearse` is the
    product's (into an existing cluster; without the lab there is no fresh-lab target provider)."""
    code, _, err = pulled.exec("/opt/drtool/bin/python", "-c", "import drtool_lab")
    assert code != 0 and "No module named 'drtool_lab'" in err, err
    for command in ("lab", "demo"):
        code, _, err = pulled.run(command, "--help")
        assert code == 2 and "No such command" in err, (command, err)
    wide = {"COLUMNS": "200"}  # rich fits help to the terminal it finds: a narrow one cuts "--target" to "--ta…"
    code, out, err = pulled.run("rehearse", "--help", env=wide)
    assert code == 0 and "--target" in out, err
    code, out, err = pulled.run("--help", env=wide)
    assert code == 0 and "drills" in out, err  # the record of rehearsals is the product's: it reads the catalog


def test_usage_error_is_a_usage_message_not_a_traceback(pulled: Pulled) -> None:
    code, _, err = pulled.run("backup", "--no-such-option")
    assert code == 2
    assert "Traceback" not in err and "No such option" in err, err


def test_backup_and_check_inside_the_image(pulled: Pulled, tmp_path: Path) -> None:
    """A real encrypted backup made by the image, read back by this checkout: the image's pins work."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "passphrase").write_text(PASSPHRASE)
    config = {
        "store": "/data/store",
        "catalog": "/data/catalog.db",
        "sources": {"files": {"paths": ["/etc/os-release", "/opt/drtool/bin"]}},
    }
    (data / "config.yaml").write_text(yaml.safe_dump(config))
    for path in (data, *data.iterdir()):
        os.chown(path, int(UID), int(UID))
    data.chmod(0o700)
    env = {"DRTOOL_CONFIG": "/data/config.yaml", "DRTOOL_PASSPHRASE_FILE": "/data/passphrase"}
    volumes = (f"{data}:/data",)

    for args in (("init", "--store", "/data/store"), ("backup", "-p", "files", "--json"), ("check", "--read-data")):
        code, out, err = pulled.run(*args, volumes=volumes, env=env)
        assert code == 0, (args, err)
        if args[0] == "backup":
            backup_id = json.loads(out)["id"]

    repo = Repository.open(open_backend(str(data / "store")), Credentials(passphrase=PASSPHRASE))
    manifest = repo.get_manifest(backup_id)
    assert manifest.plugins["files"].status == "ok"
    assert (data / "store").stat().st_uid == int(UID)  # written by the image's user, not root
