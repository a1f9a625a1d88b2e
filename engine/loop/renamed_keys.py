"""Settings renamed or moved since an earlier release: a file, a --set or a configuration stored with a round
that uses an old key is read under the new one (a file or --set with a ``DeprecatedSetting`` warning naming it),
as every old name is read (``coevolve_engine.core.renamed``)."""

from __future__ import annotations

import warnings
from typing import Any, Mapping

from coevolve_engine.core.renamed import DeprecatedSetting, given_twice, moved
from coevolve_engine.loop.config import ConfigError, RunConfig


#: where a configuration read back from the store is named: its old keys are translated without a word
STORED = "stored configuration"

#: settings renamed or moved (to [models]): old dotted key -> the keys that now hold its value, and whether it is
#: the more specific of two old keys that set one new key (an explorer's own server over the shared one)
RENAMED: dict[str, tuple[tuple[str, ...], bool]] = {
    "validation.k": (("validation.attempts",), True),
    "trainer.options.num_generations": (("trainer.options.group_size",), True),
    "bootstrap.explorer_model": (("models.explorer.model",), True),
    "bootstrap.model": (("models.abstraction.model",), True),
    "bootstrap.api_base": (("models.explorer.api_base", "models.abstraction.api_base"), False),
    "bootstrap.options.explorer_api_base": (("models.explorer.api_base",), True),
    "synthesis.summary_model": (("models.summary.model",), True),
    "synthesis.options.model": (("models.abstraction.model",), True),
    "synthesis.options.explorer_model": (("models.explorer.model",), True),
    "synthesis.options.api_base": (("models.explorer.api_base", "models.abstraction.api_base",
                                    "models.summary.api_base"), False),
    "synthesis.options.explorer_api_base": (("models.explorer.api_base",), True),
    "validation.agent_model": (("models.agent.model",), True),
    "validation.judge_model": (("models.judge.model",), True),
    "validation.api_base": (("models.agent.api_base", "models.judge.api_base"), True),
}
#: the synthesizers whose models the old synthesis.options keys named (a plugin's own options are its own)
_EXPLORING = ("llm", "llm-unguided")
#: keys a config never holds: they would be stored with every round
_SECRETS = ("bootstrap.options.api_key", "synthesis.options.api_key")


def _table(data: dict[str, Any], key: str, *, create: bool = False) -> tuple[dict[str, Any] | None, str]:
    """The table that holds the dotted ``key`` and the key's last part; None when a table on the way is missing
    (made, with ``create``)."""
    *parents, last = key.split(".")
    table = data
    for part in parents:
        table = table.setdefault(part, {}) if create else table.get(part)
        if not isinstance(table, dict):
            if create:
                raise ConfigError(f"{'.'.join(parents)} must be a table")
            return None, last
    return table, last


def _holds(data: dict[str, Any], key: str) -> bool:
    table, last = _table(data, key)
    return table is not None and last in table


def _pop(data: dict[str, Any], key: str) -> tuple[bool, Any]:
    table, last = _table(data, key)
    if table is None or last not in table:
        return False, None
    return True, table.pop(last)


def _put(data: dict[str, Any], key: str, value: Any) -> None:
    table, last = _table(data, key, create=True)
    table[last] = value


def upgrade(data: dict[str, Any], where: str, synthesizer: str, *, warn: bool = True) -> dict[str, Any]:
    """``data`` (one file's table, a --set, or a stored config) with the keys in ``RENAMED`` moved to the
    ones that replace them (a warning each, unless ``warn`` is false). ``synthesizer``: the one in effect,
    since synthesis.options named models only for the exploring synthesizers. Two old keys that give one new
    key different values (a bootstrap explorer and a synthesis explorer: a run now has one) are refused."""
    for key in _SECRETS:
        if _pop(data, key)[0]:
            raise ConfigError(f"{where}: {key}: a key is not written in the configuration (it is stored with every "
                              "round); export it and name the variable in models.ROLE.api_key_env")
    found: dict[str, list[tuple[bool, Any, str]]] = {}
    for old, (new_keys, specific) in RENAMED.items():
        if old.startswith("synthesis.options.") and synthesizer not in _EXPLORING:
            continue
        present, value = _pop(data, old)
        if not present:
            continue
        for new in new_keys:
            if _holds(data, new):
                raise ConfigError(f"{where}: {given_twice(old, new, 'key')}")
        if warn:
            why = " (every model the run calls is in [models])" if new_keys[0].startswith("models.") else ""
            warnings.warn(DeprecatedSetting(f"{where}: {moved(old, ' and '.join(new_keys), 'key', why)}"), stacklevel=2)
        for new in new_keys:
            found.setdefault(new, []).append((specific, value, old))
    for new, given in found.items():
        given = [g for g in given if g[1] != ""] or given[-1:]  # an empty value was the default: "unset"
        rank = max(specific for specific, _, _ in given)
        chosen = [(value, old) for specific, value, old in given if specific == rank]
        if len({repr(value) for value, _ in chosen}) > 1 and warn:
            named = " and ".join(f"{old} = {value!r}" for value, old in chosen)
            raise ConfigError(f"{where}: {named} differ, but a run has one {new.split('.')[1]} model: set {new}")
        _put(data, new, chosen[-1][0])
    return data


def synthesizer_in_effect(*tables: Mapping[str, Any]) -> str:
    """The synthesizer in effect: the last table that names one, else the default."""
    for table in reversed(tables):
        section = table.get("synthesis")
        if isinstance(section, Mapping) and isinstance(section.get("synthesizer"), str):
            return section["synthesizer"]
    return RunConfig().synthesis.synthesizer


def json_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a table of tables (so that ``upgrade`` leaves the caller's own untouched)."""
    return {k: json_copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}
