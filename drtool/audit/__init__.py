"""`drtool audit`: the platform guide's go-live checklist graded against a live cluster, the plans and the catalog.

Each item is graded pass, fail or unknown with the evidence it used (``grades``): what the cluster's
workloads declare (``workloads``, read-only through the backup identity), what the plans and drill records
say (``records``), what the newest checkpoints hold (``checkpoints``). ``scorecard`` runs them all;
``output`` renders the scorecard for a terminal, JSON, HTML and Prometheus.
"""
