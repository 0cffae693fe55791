"""The commands the lab adds to `drtool` (lab, demo, rehearse), registered in the `drtool.commands` group."""
