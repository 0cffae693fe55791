"""Velero backups brought into drtool's store (`drtool import velero`, docs/velero.md).

``backup`` reads and checks one backup from its storage location, ``tarball`` parses its objects,
``convert`` writes them as the kubernetes plugin's artifacts, ``importer`` does it all inside one backup
session, so a refused backup writes nothing.
"""
