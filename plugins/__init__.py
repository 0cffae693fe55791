"""drtool's built-in plugins (import name ``drtool_plugins``), each registered in the ``drtool.plugins`` group."""
