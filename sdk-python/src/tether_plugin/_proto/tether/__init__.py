"""tether's own services (generated; see ``tether_plugin._proto``)."""
