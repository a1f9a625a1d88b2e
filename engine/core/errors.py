"""Errors a user can act on. The CLI prints their message and exits non-zero, never a traceback."""

from __future__ import annotations


class CoevolveError(Exception):
    """Base class for errors caused by input, configuration or the state of the store."""


class StoreError(CoevolveError):
    """The store cannot be opened or used as asked."""


class StoreLockedError(StoreError):
    """Another process holds the store's write lock for longer than we were willing to wait."""


class StoreDamagedError(StoreError):
    """The store's file is damaged (truncated, or blocks that fail their checksum)."""

    def __init__(self, path: object, detail: str) -> None:
        super().__init__(
            f"the store at {path} is damaged: {detail}. Nothing was changed. Restore it from a backup or a copy; "
            "`coevolve-engine init` will not rewrite it (move it aside to start a new store there)")


class IngestError(CoevolveError):
    """A file could not be ingested; nothing from it was written.

    ``path``, ``location`` ('line 7', 'row 7' or None) and ``field`` say where the problem is.
    """

    def __init__(self, path: str, message: str, *, location: str | None = None, field: str | None = None):
        self.path = path
        self.location = location
        self.field = field
        self.reason = message
        where = ", ".join(part for part in (path, location, f"field {field!r}" if field else None) if part)
        super().__init__(f"{where}: {message}")


class CurriculumError(CoevolveError):
    """A weight set cannot be computed, stored or loaded as asked."""


class ConfigError(CoevolveError):
    """A configuration file or override that cannot be used; the message names the file and the key."""
