"""What plan checks run with (``context``): the run's plan, targets, backup and clock, and each check's times.

The platform checks themselves (``kueue-admits``, ``workloads-ready``, ``no-reissue``, ``gc-stable``,
``training-resumes``) are contributed by the plugins they belong to through the ``platform_checks`` hook
(drtool.plugin.checks); the cluster readings they share are drtool.kube.readings. docs/plans.md lists them.
"""
