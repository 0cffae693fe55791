"""The lab support of each built-in plugin, registered in the `drtool_lab` entry-point group."""
