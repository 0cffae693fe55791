"""Warm standby: a second cluster kept hydrated from the store alone, failover and failback (docs/standby.md).

``links``: which chain links of a set are new, and whether each authenticates. ``state``: the standby's
position and what it holds back, kept on the standby cluster. ``hydrate``: the loop that applies links
through each plugin's ``StandbySupport`` hook. ``metrics``: lag as Prometheus series. ``failover``: fence,
catch up, release, check, cut over, measure. The fence record itself is the store's (drtool/repo/fences.py),
because every backup session checks it.
"""
