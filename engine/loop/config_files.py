"""Reading `coevolve-engine run`'s configuration: TOML files (with ``extends``) and ``--set`` overrides.

    config = load_config(Path("run.toml"), overrides=["trainer.steps_per_round=4", "rounds=3"])

Unknown keys and values of the wrong type are refused with the file (or the ``--set``) and the dotted key.
A file may start with ``extends = "other.toml"`` (relative to the file; chains allowed, cycles refused): it is
then read over that file and states only what differs, as the ablation recipes under ``recipes/`` do.

The settings that named a model before ``[models]`` held them all (``bootstrap.explorer_model``,
``synthesis.options.api_base``, ``validation.judge_model``, ...) are still read, each with a warning naming the
key that replaces it (``RENAMED``); a configuration stored with a round in that form is read quietly.
"""

from __future__ import annotations

import codecs
import dataclasses
import difflib
import re
import tomllib
from pathlib import Path
from typing import Any, Iterator, Mapping

from coevolve_engine.core.settings import coerce, field_types, is_section
from coevolve_engine.loop.config import ConfigError, RunConfig
from coevolve_engine.loop.renamed_keys import STORED, json_copy, synthesizer_in_effect, upgrade

def _build(cls: type, values: Mapping[str, Any], where: str, prefix: str = "") -> Any:
    """A settings section from a table, every value through ``coerce`` against its field's type."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: {prefix.rstrip('.') or 'the file'} must be a table, got {values!r}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    hints = field_types(cls)
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {prefix}{close[0]}?)" if close else f"; known: {', '.join(sorted(known))}"
            raise ConfigError(f"{where}: unknown setting {prefix}{key}{hint}")
        if is_section(known[key]):
            kwargs[key] = _build(known[key].default_factory, value, where, f"{prefix}{key}.")
            continue
        try:
            value = coerce(value, hints[key])
        except ValueError as exc:
            raise ConfigError(f"{where}: {prefix}{key} must be {exc}, got {value!r}") from None
        if isinstance(value, (list, tuple)) and any(not isinstance(item, str) for item in value):
            raise ConfigError(f"{where}: {prefix}{key} must be a list of strings, got {value!r}")
        kwargs[key] = dict(value) if isinstance(value, Mapping) else list(value) if isinstance(value, tuple) else value
    return cls(**kwargs)


def _parse_value(text: str) -> Any:
    """A TOML value (4, 1e-3, true, "x", [1, 2], {a = 1}), or the text itself (a bare path or name)."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text
    except RecursionError:  # Python's TOML reader recurses once per level of nesting
        raise ConfigError(f"--set value {_shorten(text)}: arrays or tables nest too deeply to read") from None


def apply_override(data: dict[str, Any], override: str) -> None:
    """Set KEY=VALUE (KEY dotted, e.g. trainer.options.learning_rate) in the raw table ``data``."""
    key, sep, text = override.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {override!r} is not KEY=VALUE (e.g. --set trainer.steps_per_round=4)")
    *parents, last = key.split(".")
    table = data
    for part in parents:
        table = table.setdefault(part, {})
        if not isinstance(table, dict):
            raise ConfigError(f"--set {override!r}: {part} is not a table")
    table[last] = _parse_value(text.strip())


def _read_table(path: Path) -> dict[str, Any]:
    """The file's TOML table; a UTF-8 byte order mark at its start (some editors write one) is skipped."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file (write one with `coevolve-engine run --print-config > "
                          f"{path}`)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return tomllib.loads(data[bom:].decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        offset = bom + exc.start
        line = data[:offset].count(b"\n") + 1
        raise ConfigError(f"{path}, line {line}: not UTF-8 text (byte {data[offset]:#04x} at offset {offset}); "
                          "TOML files are UTF-8") from None
    except RecursionError:  # Python's TOML reader recurses once per level of nesting
        raise ConfigError(f"{path}: not valid TOML: arrays or tables nest too deeply to read") from None


def _shorten(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def merge(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` laid over it: tables merge key by key, any other value replaces."""
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_config_file(path: Path, _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The raw table of a config file, with the file named by its top-level ``extends`` key (a path relative to
    this file; that file may extend another) underneath: this file states only what differs. Each file's keys
    are checked against the settings on their own, so an error names the file that has the bad key."""
    path = Path(path)
    resolved = path.resolve()
    if resolved in _chain:
        cycle = " -> ".join(p.name for p in (*_chain[_chain.index(resolved):], resolved))
        raise ConfigError(f"{path}: `extends` makes a cycle: {cycle}")
    data = _read_table(path)
    parent = data.pop("extends", None)
    base: dict[str, Any] = {}
    if parent is not None:
        if not isinstance(parent, str) or not parent:
            raise ConfigError(f"{path}: extends must be the path of another config file, got {parent!r}")
        base = read_config_file(path.parent / parent, (*_chain, resolved))
    upgrade(data, str(path), synthesizer_in_effect(base, data))
    _build(RunConfig, data, str(path))  # unknown keys and wrong types, named in this file
    return merge(base, data) if parent is not None else data


def load_config(path: Path | None, overrides: list[str] | tuple[str, ...] = (), *, check: bool = True) -> RunConfig:
    """The file (if any, merged over the files it ``extends``) with the overrides applied, checked (unless
    ``check`` is false: a template may lack the required fields)."""
    data: dict[str, Any] = {}
    if path is not None:
        data = read_config_file(Path(path))  # the file's own keys are checked there, naming the file
    for override in overrides:
        # each override on its own, so that an error names the --set that caused it, never the file
        alone = _override_only(override)
        where = f"--set {override}"
        _build(RunConfig, upgrade(alone, where, synthesizer_in_effect(data, alone)), where)
        apply_override(data, override)
        upgrade(data, f"--set {override}", synthesizer_in_effect(data), warn=False)  # warned just above
    config = _build(RunConfig, data, str(path) if path is not None else "--set")
    if check:
        try:
            config.check()
        except ConfigError as exc:
            source = _source_of(exc, path, overrides)
            if source is None or source in str(exc):
                raise
            raise ConfigError(f"{source}: {exc}") from None
    return config


def _override_only(override: str) -> dict[str, Any]:
    data: dict[str, Any] = {}
    apply_override(data, override)
    return data


def _source_of(exc: ConfigError, path: Path | None, overrides: list[str] | tuple[str, ...]) -> str | None:
    """Where a value that ``check`` refused came from: the --set of the key it names, else the file."""
    override = _override_of(str(exc), overrides)
    if override is not None:
        return f"--set {override}"
    return str(path) if path is not None else None


def blame_override(exc: ConfigError, overrides: list[str] | tuple[str, ...]) -> ConfigError:
    """A refusal by the check before a round (a plugin refusing one of its settings, a missing launcher), with
    the --set that gave the refused key named first when one did; else ``exc`` as it is."""
    override = _override_of(str(exc), overrides)
    if override is None or f"--set {override}" in str(exc):
        return exc
    return ConfigError(f"--set {override}: {exc}")


def _override_of(message: str, overrides: list[str] | tuple[str, ...]) -> str | None:
    """The override whose key the message is about: it names the dotted key, or (a plugin's own setting, such as
    trainer.options.learning_rate) it starts with the table's key and names the setting. When several fit, the
    one named first (an unknown option's error goes on to list the known ones), the last given on a tie."""
    found: list[tuple[int, int, str]] = []
    for index, override in enumerate(overrides):
        key = override.partition("=")[0].strip()
        table, _, name = key.rpartition(".")
        if message.startswith((f"{key} ", f"{key}:")) or f" {key} " in message:
            found.append((0, -index, override))
        elif table and message.startswith(f"{table}:"):
            named = re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", message)
            if named:
                found.append((named.start(), -index, override))
    return min(found)[2] if found else None


def config_from_dict(data: Mapping[str, Any]) -> RunConfig:
    """A config as stored with a round (``RunConfig.to_dict``); one stored before [models] is read in its terms."""
    data = upgrade(json_copy(data), STORED, synthesizer_in_effect(data), warn=False)
    return _build(RunConfig, data, STORED)


def differences(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Dotted keys whose values differ between two config dicts."""
    for key in sorted(set(a) | set(b)):
        left, right = a.get(key), b.get(key)
        if isinstance(left, Mapping) and isinstance(right, Mapping):
            yield from differences(left, right, f"{prefix}{key}.")
        elif left != right:
            yield f"{prefix}{key}"
