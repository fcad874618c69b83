"""Plugin-to-plugin calls through a tether host (docs/PROTOCOL.md §10.3).

A tether catalog host (``Supervisor``) serves every plugin the host service
``tether.plugins.v1.Plugins``. ``Open{plugin}`` asks it for a connection to another plugin of its
catalog: when the operator's grants let this plugin call that one (``calls = ["NAME"]`` under
``[plugins.THIS]``), the host starts it if needed and serves a relay to it under a broker id on
this plugin's broker, which :meth:`GRPCBroker.open_plugin <tether_plugin.GRPCBroker.open_plugin>`
then dials. The plugin never learns the other's address, certificate, secrets or config.
"""

from __future__ import annotations

import grpc

from ._proto.tether.plugins.v1 import plugins_pb2, plugins_pb2_grpc
from .errors import PluginRefusedError


def open_broker_id(host: grpc.Channel, plugin: str) -> int:
    """Asks the host's ``Plugins/Open`` (on its host-services channel ``host``) for a connection
    to catalog plugin ``plugin``; returns the broker id of the relay the host serves.

    Raises :class:`~tether_plugin.errors.PluginRefusedError` with the host's status code and
    message when it does not open one (``PERMISSION_DENIED``: not granted, the message names the
    grants line to add; ``NOT_FOUND``: not in its catalog; ``UNAVAILABLE``: it could not start)."""
    try:
        opened = plugins_pb2_grpc.PluginsStub(host).Open(plugins_pb2.OpenRequest(plugin=plugin))
    except grpc.RpcError as e:
        raise PluginRefusedError(plugin, e.code(), e.details() or "") from None
    return opened.broker_id
