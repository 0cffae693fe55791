"""What plugins share, as part of the plugin contract surface (docs/plugins.md, "The toolkit").

``settings`` coerces the values of source, target and option mappings (one ``as_bool`` for every plugin);
``paths`` checks names from backup content, ``archive`` reads tars safely, ``oci`` copies images and charts
by digest. The Kubernetes machinery several plugins build on is ``drtool.kube``, beside the toolkit (the
core uses it too). A plugin imports from here, never from another plugin.
"""
