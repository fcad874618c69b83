"""``package tether.plugins.v1`` (generated; see ``tether_plugin._proto``)."""
