"""Importers: rollouts written by a trainer outside the engine, turned into trajectory records.

An importer reads one dump file and yields ``(line, trajectory record)`` pairs; ``import_rollouts``
ingests each file as one unit (``Store.add_records``), so a bad line leaves the store as it was and the
error names the file and the line. Importers are a registry like environments and agents; third parties
add theirs through the ``coevolve_engine.importers`` entry-point group::

    [project.entry-points."coevolve_engine.importers"]
    mytrainer = "mypackage.dumps:MyTrainerImporter"

An importer class is built with an ``ImportOptions`` and has ``read(path) -> Iterator[(line, record)]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Protocol

from coevolve_engine.core.json_input import read_json
from coevolve_engine.core.errors import IngestError
from coevolve_engine.core.registry import Registry

if TYPE_CHECKING:
    from coevolve_engine.core.ingest import IngestReport
    from coevolve_engine.core.store import Store

IMPORTERS = Registry("rollout importer", entry_point_group="coevolve_engine.importers")

IMPORTERS.register(
    "verl",
    "coevolve_engine.adapters.importers.verl_dump:VerlDumpImporter",
    description="verl's trainer.rollout_data_dir dumps: <step>.jsonl, one line per rollout "
                "(input, output, gts, score, step, reward extras).",
)


@dataclass(frozen=True)
class ImportOptions:
    """How dumped rollouts become trajectory records."""

    step_offset: int = 0  # added to the dump's step, to place an external run after the store's history
    reward_range: tuple[float, float] = (0.0, 1.0)  # (lo, hi): reward = clip((score - lo) / (hi - lo), 0, 1)
    policy: str | None = None  # checkpoint id recorded on every imported rollout
    parse_actions: bool = True  # read <tool_call> blocks in the output as the rollout's actions
    index_to_task: dict[int, str] = field(default_factory=dict)  # from an export's manifest.json
    known_tasks: frozenset[str] | None = None  # task ids a rollout may name (None: any)

    def __post_init__(self) -> None:
        lo, hi = self.reward_range
        if not hi > lo:
            raise ValueError(f"reward_range ({lo}, {hi}) must have hi > lo")


class RolloutImporter(Protocol):
    def __init__(self, options: ImportOptions) -> None: ...

    def read(self, path: Path) -> Iterator[tuple[int, dict]]: ...


def normalise_reward(score: float, reward_range: tuple[float, float]) -> float:
    """The documented rule: scale ``score`` from [lo, hi] to [0, 1] and clip what falls outside."""
    lo, hi = reward_range
    return min(1.0, max(0.0, (score - lo) / (hi - lo)))


def read_manifest(path: str | Path) -> dict[int, str]:
    """``index -> task_id`` from the ``manifest.json`` an export wrote (a directory means its manifest)."""
    path = Path(path)
    if path.is_dir():
        path = path / "manifest.json"
    try:
        rows = read_json(path.read_text(encoding="utf-8"), unique_keys=True)["rows"]
        return {int(row["index"]): str(row["task_id"]) for row in rows}
    except FileNotFoundError:
        raise IngestError(str(path), "no such manifest (coevolve-engine export writes manifest.json)") from None
    except (KeyError, TypeError, ValueError) as exc:  # ValueError: not JSON, nested too deep, a key twice
        raise IngestError(str(path), f"not a manifest written by coevolve-engine export ({exc!r})") from None


def _numeric_first(path: Path) -> tuple[int, float, str]:
    return (0, float(path.stem), path.name) if re.fullmatch(r"\d+", path.stem) else (1, 0.0, path.name)


def dump_files(paths: Iterable[str | Path]) -> list[Path]:
    """The files to import: each file as given, each directory's ``*.jsonl`` in step order."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(path.glob("*.jsonl"), key=_numeric_first)
            if not found:
                raise IngestError(str(path), "directory holds no .jsonl dump files")
            files.extend(found)
        elif not path.exists():
            raise IngestError(str(path), "no such file or directory")
        else:
            files.append(path)
    return files


_RECORD = re.compile(r"\brecord (\d+)$")


def import_file(store: "Store", importer: RolloutImporter, path: Path) -> "IngestReport":
    """Read one dump with ``importer`` and ingest it as one unit; errors name the file and its line."""
    pairs = list(importer.read(path))
    if not pairs:
        raise IngestError(str(path), "holds no rollouts")
    lines = [line for line, _ in pairs]
    try:
        return store.add_records("trajectories", [record for _, record in pairs], label=str(path))
    except IngestError as exc:
        match = _RECORD.search(exc.location or "")
        if not match:
            raise
        line = lines[int(match.group(1)) - 1]
        raise IngestError(str(path), exc.reason, location=f"line {line}", field=exc.field) from None


def import_rollouts(
    store: "Store", paths: Iterable[str | Path], *, format: str = "verl", options: ImportOptions | None = None
) -> list["IngestReport"]:
    """Import trainer dumps (files, or directories of ``*.jsonl``) of ``format``, one file per unit.

    Unless ``options.known_tasks`` says otherwise, a rollout must name a task in the store.
    """
    options = options or ImportOptions()
    if options.known_tasks is None:
        ids = frozenset(r[0] for r in store.execute("SELECT task_id FROM tasks").fetchall())
        options = replace(options, known_tasks=ids)
    importer = IMPORTERS.load(format)(options)
    return [import_file(store, importer, path) for path in dump_files(paths)]


__all__ = [
    "IMPORTERS",
    "ImportOptions",
    "RolloutImporter",
    "dump_files",
    "import_file",
    "import_rollouts",
    "normalise_reward",
    "read_manifest",
]
