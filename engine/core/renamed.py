"""Old names, read one way wherever they are given: a run's configuration keys (``loop/renamed_keys.py``), a
trainer's options (its options class's ``RENAMED``) and a command's option spellings (``cli/options.py``'s
``renamed``).

Given alone, an old name still works for one release: its value goes to the name that replaced it, with a
``DeprecatedSetting`` warning (or, on the command line, a line on standard error) that says what to write
instead (``moved``). Given beside its new name, it is refused (``given_twice``).
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping

from coevolve_engine.core.errors import ConfigError


class DeprecatedSetting(FutureWarning):
    """A setting given by an old name that still works; the message names the one to use instead."""


def moved(old: str, new: str, what: str = "name", why: str = "") -> str:
    """What an old name given alone is told: ``what`` is the kind of name (key, option, spelling), ``why`` an
    aside after the new name."""
    return f"{old} is now {new}{why}; the old {what} goes in the next release"


def given_twice(old: str, new: str, what: str = "name") -> str:
    """Why an old name given beside its new one is refused."""
    return f"{old} is the old {what} of {new}: give one of them"


def rename(options: Mapping[str, Any], renamed: Mapping[str, str], where: str, what: str = "option",
           *, warn: bool = True) -> dict[str, Any]:
    """``options`` with each old name in ``renamed`` (old -> new) moved to its new one, a ``DeprecatedSetting``
    each (unless ``warn`` is false); ConfigError, naming ``where``, when both are given."""
    options = dict(options)
    for old, new in renamed.items():
        if old not in options:
            continue
        if new in options:
            raise ConfigError(f"{where}: {given_twice(old, new, what)}")
        if warn:
            warnings.warn(DeprecatedSetting(f"{where}: {moved(old, new, what)}"), stacklevel=2)
        options[new] = options.pop(old)
    return options
