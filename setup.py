"""Maps the ``plugins/`` folder to the ``drtool_plugins`` import name and ``lab/`` to ``drtool_lab``
(docs/architecture.md). The container image is built without ``lab/`` (Containerfile): then there is no
``drtool_lab`` to install, and the lab's entry points name a package that is not there, which drtool skips."""

from pathlib import Path

from setuptools import find_packages, setup

plugin_packages = ["drtool_plugins"] + [f"drtool_plugins.{p}" for p in find_packages("plugins")]
has_lab = Path(__file__).with_name("lab").is_dir()
lab_packages = ["drtool_lab"] + [f"drtool_lab.{p}" for p in find_packages("lab")] if has_lab else []
setup(
    packages=find_packages(include=["drtool", "drtool.*"]) + plugin_packages + lab_packages,
    package_dir={"drtool_plugins": "plugins"} | ({"drtool_lab": "lab"} if has_lab else {}),
)
