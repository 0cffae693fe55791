"""The Kubernetes machinery that plugins (kubernetes, kueue, dns-certs, helm, images) and the core (platform
checks, the independence finder) share: client and kubeconfig, discovery, the artifact format of cleaned
objects (``artifacts``, ``objects``), listing into artifacts (``listing``), restore in dependency order with
server-side apply (``restore``, ``apply``, ``order``, ``crds``), read-back checks (``verify``), the
references restored objects carry (``references``). The seeded lab cluster is the lab's (``drtool_lab.cluster``).

Infrastructure, not plugin code: it sits above the plugin contract and below the plugins (drtool/layers.py).
"""
