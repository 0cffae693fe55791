"""Platform checks: a restore judged by what the restored platform's own controllers do with it.

One module per check type (``kueue_admits``, ``workloads_ready``, ``no_reissue``, ``gc_stable``,
``training_resumes``), each reading the live target through its own API with a timeout and one line saying
why it failed; ``context`` is what they run with, ``kube`` the readings they share. docs/plans.md lists them.
"""
