"""Scenario drills: one failure a platform team meets, injected into a lab, recovered with a shipped plan,
judged by the plan's checks and recorded with its actual RPO and time to service (docs/drills.md).

``scenarios`` is the matrix of failures; ``guard`` refuses a cluster that is not a lab unless the operator
names it and approves; ``run`` drives one drill; ``kueue`` is a runnable scenario; ``matrix`` renders the
scenarios against their latest drills (terminal, JSON, HTML, Prometheus).
"""
