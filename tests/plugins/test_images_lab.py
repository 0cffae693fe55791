"""LabSupport of the images and helm plugins: seed a lab, back up, restore into a fresh lab target, verify.

This is the path the demo and rehearsals take (``drtool.rehearsal.target``), so both plugins join them.
"""

from __future__ import annotations

from pathlib import Path

from drtool_lab.lab import Lab
from drtool_lab.targets import lab_target, seed_sources
from drtool_plugins.helm import HelmPlugin
from drtool_plugins.images import ImagesPlugin

from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.restore import run_restore


def test_seed_backup_restore_into_lab_target(repo: Repository, lab_root: Path) -> None:
    plugins = [HelmPlugin(), ImagesPlugin()]
    source_lab = Lab("imgs-lab-src", root=lab_root)
    target = None
    try:
        sources = seed_sources(source_lab, plugins)
        assert len(sources["images"]["images"]) == 3 and len(sources["helm"]["oci_charts"]) == 3
        with BackupSession(repo) as session:
            for plugin in plugins:
                assert session.run_plugin(plugin, sources[plugin.name]).status == "ok"
            manifest = session.commit()
        assert manifest.plugins["helm"].meta["revisions"] == 4
        target = lab_target(plugins, root=lab_root, name="imgs-lab-dst")
        for plugin in plugins:
            outcome = run_restore(repo, manifest, plugin, target.overrides[plugin.name])
            assert outcome.verified, (plugin.name, [c for c in outcome.checks if not c.ok])
    finally:
        if target is not None:
            target.teardown()
        source_lab.down()
