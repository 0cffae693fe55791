"""Maps the ``plugins/`` folder to the ``drtool_plugins`` import name and ``lab/`` to ``drtool_lab``
(docs/architecture.md)."""

from setuptools import find_packages, setup

plugin_packages = ["drtool_plugins"] + [f"drtool_plugins.{p}" for p in find_packages("plugins")]
lab_packages = ["drtool_lab"] + [f"drtool_lab.{p}" for p in find_packages("lab")]
setup(
    packages=find_packages(include=["drtool", "drtool.*"]) + plugin_packages + lab_packages,
    package_dir={"drtool_plugins": "plugins", "drtool_lab": "lab"},
)
