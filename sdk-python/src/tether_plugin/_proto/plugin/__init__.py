"""go-plugin's ``package plugin`` services (generated; see ``tether_plugin._proto``)."""
