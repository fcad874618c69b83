"""Reading the secrets and config files a tether host granted this plugin.

A tether host delivers each granted secret (config file) as one file, named as requested, in a
private directory whose absolute path it passes in ``TETHER_SECRETS_DIR``
(``TETHER_CONFIG_DIR``). Values never travel in environment variables, and this module never
puts a value in an error message or a log.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from .errors import InvalidContentError, InvalidNameError, NotGrantedError

#: Directory of granted secrets (tether hosts only).
ENV_SECRETS_DIR = "TETHER_SECRETS_DIR"
#: Directory of granted config files (tether hosts only).
ENV_CONFIG_DIR = "TETHER_CONFIG_DIR"

#: Each kind's plural and the manifest (and grants file) key that lists it, by its noun.
_KINDS = {"secret": ("secrets", "secrets"), "config file": ("config files", "config")}


def not_available(kind: str, env_var: str, name: str, *, others: bool) -> str:
    """Why the ``kind`` (``secret`` or ``config file``) ``name`` is not available (``others``:
    other files of that kind were delivered) and what to do, in the one wording every tether SDK
    uses, word for word (``proto/testdata/not-available.json``): a plugin cannot tell a name
    missing from its manifest from one the operator did not grant, so it names both remedies."""
    plural, key = _KINDS[kind]
    quoted = json.dumps(name)
    if others:
        why = f"the host delivered other {plural}, not this one (no file {quoted} in {env_var})"
    else:
        why = f"the host delivered no {plural} ({env_var} is not set)"
    return (
        f"{kind} {quoted} is not available to this plugin: {why}. To receive it, list it in the "
        f"plugin's manifest (`{key} = [{quoted}]`) and have the operator grant it in the grants "
        f"file (`{key} = [{quoted}]` under the plugin's `[plugins.NAME]`)."
    )


class GrantedFiles:
    """One kind of granted file: :data:`secrets` or :data:`config`.

    ``kind`` is ``"secret"`` or ``"config file"``; ``environ`` defaults to ``os.environ`` and
    is read at each call.
    """

    def __init__(self, env_var: str, kind: str, environ: Mapping[str, str] | None = None) -> None:
        self._env_var = env_var
        self._kind = kind
        self._environ = environ

    def read_bytes(self, name: str) -> bytes:
        """The content of the granted file ``name``.

        Raises :class:`~tether_plugin.errors.InvalidNameError` for a name that could name
        another file, :class:`~tether_plugin.errors.NotGrantedError` when the host granted no
        such file.
        """
        if not name or name in (".", "..") or "/" in name or "\0" in name:
            raise InvalidNameError(
                f"invalid {self._kind} name {name!r}: names must be non-empty, not '.' or '..', "
                "and contain no '/' or NUL"
            )
        environ = os.environ if self._environ is None else self._environ
        directory = environ.get(self._env_var)
        if not directory:
            raise NotGrantedError(not_available(self._kind, self._env_var, name, others=False))
        path = os.path.join(directory, name)
        try:
            # O_NOFOLLOW: the name must be the granted file itself, not a link elsewhere.
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise NotGrantedError(not_available(self._kind, self._env_var, name, others=True)) from None
        except OSError as e:
            raise NotGrantedError(
                f"{self._kind} {name!r} cannot be read from {self._env_var}: {e.strerror}"
            ) from None
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def read(self, name: str, encoding: str = "utf-8") -> str:
        """The content of the granted file ``name`` as text (see :meth:`read_bytes`)."""
        data = self.read_bytes(name)
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            # The value itself must not appear in the message.
            raise InvalidContentError(
                f"{self._kind} {name!r} is not valid {encoding}; use read_bytes() for binary values"
            ) from None

    def names(self) -> list[str]:
        """The names of all granted files of this kind, sorted (empty when none were granted)."""
        environ = os.environ if self._environ is None else self._environ
        directory = environ.get(self._env_var)
        if not directory:
            return []
        return sorted(e.name for e in os.scandir(directory) if e.is_file(follow_symlinks=False))


#: The secrets the host granted (``TETHER_SECRETS_DIR``): ``secrets.read("api_token")``.
secrets = GrantedFiles(ENV_SECRETS_DIR, "secret")
#: The config files the host granted (``TETHER_CONFIG_DIR``): ``config.read("settings.json")``.
config = GrantedFiles(ENV_CONFIG_DIR, "config file")
