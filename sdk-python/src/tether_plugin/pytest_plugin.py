"""pytest fixtures for plugin authors: ``tether_fake_host`` and ``tether_launch``.

Registered automatically when ``tether-plugin`` is installed (entry point ``pytest11``); in a
checkout, add ``pytest_plugins = ["tether_plugin.pytest_plugin"]`` to ``conftest.py``. See
:mod:`tether_plugin.testing`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .testing import FakeHost, LaunchedPlugin


@pytest.fixture
def tether_fake_host() -> Iterator[Callable[..., FakeHost]]:
    """A factory of :class:`~tether_plugin.testing.FakeHost`\\ s (same arguments), closed at
    the end of the test."""
    made: list[FakeHost] = []

    def make(**kwargs: Any) -> FakeHost:
        host = FakeHost(**kwargs)
        made.append(host)
        return host

    yield make
    for host in made:
        host.close()


@pytest.fixture
def tether_launch() -> Iterator[Callable[..., LaunchedPlugin]]:
    """A factory of :class:`~tether_plugin.testing.LaunchedPlugin`\\ s (same arguments). Plugins
    the test did not shut down are killed at its end."""
    made: list[LaunchedPlugin] = []

    def launch(command: Any, **kwargs: Any) -> LaunchedPlugin:
        plugin = LaunchedPlugin(command, **kwargs)
        made.append(plugin)
        return plugin

    yield launch
    for plugin in made:
        plugin.kill()
