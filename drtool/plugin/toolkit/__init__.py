"""What plugins share, as part of the plugin contract surface (docs/plugins.md, "The toolkit").

``settings`` coerces the values of source, target and option mappings (one ``as_bool`` for every plugin);
``kube`` is the Kubernetes machinery several plugins build on: the API client and kubeconfig loading,
discovery, the artifact format of cleaned objects, paged listing into artifacts, server-side apply in
dependency order, CRD helpers, read-back checks, and the references restored objects carry. A plugin
imports from here, never from another plugin.
"""
