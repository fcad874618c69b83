"""``tether.plugins.v1.Plugins``: plugin-to-plugin calls through the host (generated; see
``tether_plugin._proto``)."""
