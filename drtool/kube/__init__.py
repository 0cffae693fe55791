"""The Kubernetes machinery of the plugins that read or write an API server (kubernetes, kueue, dns-certs,
helm, images): client and kubeconfig, discovery, the artifact format of cleaned objects (``artifacts``,
``objects``), listing into artifacts (``listing``), restore in dependency order with server-side apply
(``restore``, ``apply``, ``order``, ``crds``), read-back checks (``verify``), the references restored
objects carry (``references``), and a seeded lab cluster (``lab``)."""
