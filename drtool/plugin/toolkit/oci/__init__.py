"""OCI registries for the plugins that copy images and charts by digest (images, helm): the registry
client, image references, registry settings, copying into artifacts (``pull``) and pushing back (``push``)."""
