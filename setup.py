"""Maps the ``plugins/`` folder to the ``drtool_plugins`` import name (docs/architecture.md)."""

from setuptools import find_packages, setup

plugin_packages = ["drtool_plugins"] + [f"drtool_plugins.{p}" for p in find_packages("plugins")]
setup(
    packages=find_packages(include=["drtool", "drtool.*"]) + plugin_packages,
    package_dir={"drtool_plugins": "plugins"},
)
