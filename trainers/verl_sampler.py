"""Weighted sampling of an exported round in verl: a dataset class for verl 0.9 and a sampler for older verl.

``coevolve-engine export --format verl`` writes each task's weight into its row's ``extra_info.weight``. The
paper's method samples uniformly and needs neither: verl's own sampler (``data.shuffle=True``, its default)
draws every row equally often. For weighted sampling (``bfcl_weighted.toml``) pick the hook your verl has:

* verl 0.9 (checked against 0.9.1 by ``bench/verl_check.py``) has no sampler setting; it builds its dataset
  from ``data.custom_cls``, so the weights travel in a dataset class::

      data.custom_cls.path=pkg://coevolve_engine.trainers.verl_sampler
      data.custom_cls.name=WeightedRLHFDataset
      +data.weighted_draws=320              # optional: rows per epoch (default: as many as the file has)

  ``WeightedRLHFDataset`` is verl's ``RLHFDataset`` whose rows are ``weighted_draws`` draws, with replacement,
  of the file's rows, row i with probability ``w_i / sum(w)``, seeded by ``data.seed`` (0 when unset): draw 0 of
  the engine's ``WeightedGroupSampler`` (groups of one row), the sampler trl-grpo and ``sample`` use. verl's
  sampler then walks them (shuffled or in order), so every epoch holds exactly those draws. Each row still
  becomes one GRPO group of ``actor_rollout_ref.rollout.n`` rollouts.

* verl releases whose ``create_rl_sampler`` reads a ``data.sampler`` section (the GitHub tree of January 2026;
  not 0.9.1, which refuses that section) take the sampler itself: set its ``class_path`` to
  ``pkg://coevolve_engine.trainers.verl_sampler`` and its ``class_name`` to ``WeightedSampler``, with
  ``data.dataloader_num_workers=0``. Its options, read from
  ``data.sampler`` (all optional): ``seed`` (default ``data.seed``, else 0), ``num_samples`` (draws per epoch,
  default the number of rows) and ``weight_key`` (default ``extra_info.weight``). Epoch ``e`` is draw ``e`` of
  a ``WeightedGroupSampler``: ``num_samples`` row indices with replacement, seeded by (``seed``, ``e``): the same
  seed gives the same draws in every process, and the sampler holds nothing but the weights, the seed and the
  epoch (``state_dict`` / ``load_state_dict`` carry the epoch across a resume).

verl is never imported when this module is: verl checks ``isinstance(sampler, AbstractSampler)`` and builds
the dataset class it is given, so ``WeightedSampler`` and ``WeightedRLHFDataset`` are built on first use, on
top of verl's classes (``WeightedSampler`` falls back to ``torch.utils.data.Sampler`` without verl).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from typing import Any, Iterator, Sequence

from torch.utils.data import Sampler

from coevolve_engine.core.sampler import SamplerError, WeightedGroupSampler

DEFAULT_WEIGHT_KEY = "extra_info.weight"
_VERL_SAMPLER_MODULE = "verl.experimental.dataset.sampler"
_VERL_DATASET_MODULE = "verl.utils.dataset.rl_dataset"


class SamplerConfigError(SamplerError):
    """The dataset carries no usable weights, or the sampler options are wrong."""


def _option(config: Any, key: str, default: Any = None) -> Any:
    if config is None:
        return default
    getter = getattr(config, "get", None)
    value = getter(key, default) if getter is not None else getattr(config, key, default)
    return default if value is None else value


def _dig(row: Any, key: str) -> Any:
    for part in key.split("."):
        row = row.get(part) if isinstance(row, dict) else None
    return row


def read_weights(data_source: Any, key: str = DEFAULT_WEIGHT_KEY) -> list[float]:
    """The weight of every row of ``data_source``: verl's RLHFDataset (its ``dataframe``), a ``datasets``
    Dataset, or any sized dataset whose rows are dicts. ``key`` is a dotted path into a row."""
    frame = getattr(data_source, "dataframe", data_source)
    top = key.split(".")[0]
    column_names = getattr(frame, "column_names", None)
    if column_names is not None and hasattr(frame, "select_columns"):
        if top not in column_names:
            raise SamplerConfigError(
                f"the dataset has no column {top!r} (columns: {', '.join(column_names)}); export it with "
                "`coevolve-engine export --format verl`, or set data.sampler.weight_key"
            )
        rows = frame.select_columns([top]).with_format(None)[top]
        values = [_dig({top: row}, key) for row in rows]
    else:
        values = [_dig(data_source[i], key) for i in range(len(data_source))]
    for index, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise SamplerConfigError(
                f"row {index} has {key} = {value!r}; every row needs a finite weight >= 0 "
                "(export the data with `coevolve-engine export --format verl`)"
            )
    if not values or not any(v > 0 for v in values):
        raise SamplerConfigError(f"no row has {key} above 0, so there is nothing to draw")
    return [float(v) for v in values]


def rows_sampler(weights: Sequence[float], *, rows: int, seed: int) -> WeightedGroupSampler:
    """The engine's sampler drawing ``rows`` row indices per draw, with replacement, by ``weights``."""
    return WeightedGroupSampler(weights, group_size=1, groups_per_step=rows, seed=seed, num_batches=1,
                                with_replacement=True)


class WeightedTaskSampler(Sampler[int]):
    """Draws row indices with replacement in proportion to the rows' weights (see the module doc): epoch ``e``
    is draw ``e`` of the engine's ``WeightedGroupSampler`` (``self.sampler``)."""

    def __init__(self, data_source: Any, data_config: Any = None, *, weights: Sequence[float] | None = None):
        options = _option(data_config, "sampler")
        key = _option(options, "weight_key", DEFAULT_WEIGHT_KEY)
        if weights is None:
            weights = read_weights(data_source, key)
        self.weights = tuple(float(w) for w in weights)
        self.num_samples = int(_option(options, "num_samples", len(self.weights)))
        if self.num_samples < 1:
            raise SamplerConfigError(f"data.sampler.num_samples must be at least 1, got {self.num_samples}")
        seed = int(_option(options, "seed", _option(data_config, "seed", 0)))
        self.sampler = rows_sampler(self.weights, rows=self.num_samples, seed=seed)

    @property
    def seed(self) -> int:
        return self.sampler.seed

    @property
    def epoch(self) -> int:
        """The epoch the next iteration draws (the sampler's next draw)."""
        return self.sampler.next_step

    def __len__(self) -> int:
        return self.num_samples

    def draws(self, epoch: int) -> list[int]:
        """The indices epoch ``epoch`` yields; a pure function of the weights, the seed and the epoch."""
        return self.sampler.batch(epoch).tolist()

    def __iter__(self) -> Iterator[int]:
        epoch = self.sampler.next_step
        self.sampler.next_step = epoch + 1
        return iter(self.draws(epoch))

    def set_epoch(self, epoch: int) -> None:
        self.sampler.next_step = epoch

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "seed": self.seed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.sampler.load_state_dict({"next_step": int(state["epoch"]), "seed": int(state.get("seed", self.seed))})

    def update(self, batch: Any) -> None:
        """verl's curriculum hook; the weights change between rounds (a new export), not within one."""


def _verl_abstract_sampler() -> type | None:
    module = sys.modules.get(_VERL_SAMPLER_MODULE)
    if module is None:
        try:
            if importlib.util.find_spec("verl") is not None:
                module = importlib.import_module(_VERL_SAMPLER_MODULE)
        except (ImportError, ValueError):  # verl releases without the custom-sampler hook (0.9 dropped it)
            module = None
    return getattr(module, "AbstractSampler", None) if module is not None else None


def weighted_sampler_class() -> type:
    """WeightedTaskSampler, made a subclass of verl's AbstractSampler when verl is installed."""
    base = _verl_abstract_sampler()
    if base is None or issubclass(WeightedTaskSampler, base):
        return WeightedTaskSampler
    namespace = {"__module__": __name__, "__doc__": WeightedTaskSampler.__doc__}
    return type("WeightedSampler", (WeightedTaskSampler, base), namespace)


def weighted_draws(dataset: Any, data_config: Any = None) -> list[int]:
    """The row indices a ``WeightedRLHFDataset`` serves: ``data.weighted_draws`` draws (default: one per row)
    by ``extra_info.weight``, seeded by ``data.seed`` (0 when unset)."""
    draws = _option(data_config, "weighted_draws", None)
    if draws is not None and (isinstance(draws, bool) or not isinstance(draws, int) or draws < 1):
        raise SamplerConfigError(f"data.weighted_draws must be a whole number of at least 1, got {draws!r}")
    weights = read_weights(dataset, DEFAULT_WEIGHT_KEY)
    sampler = rows_sampler(weights, rows=len(weights) if draws is None else draws,
                           seed=int(_option(data_config, "seed", 0)))
    return sampler.batch(0).tolist()


def weighted_dataset_class() -> type:
    """verl's RLHFDataset whose rows are weighted draws of the file's rows (see the module doc)."""
    base = importlib.import_module(_VERL_DATASET_MODULE).RLHFDataset

    def __init__(self, data_files, tokenizer, config, processor=None, max_samples: int = -1):
        base.__init__(self, data_files, tokenizer, config, processor=processor, max_samples=max_samples)
        self.draws = weighted_draws(self, config)

    def __len__(self) -> int:
        return len(self.draws)

    def __getitem__(self, item: int) -> dict:
        return base.__getitem__(self, self.draws[item])

    namespace = {"__module__": __name__, "__init__": __init__, "__len__": __len__, "__getitem__": __getitem__,
                 "__doc__": "verl's RLHFDataset serving weighted draws of its rows (coevolve_engine.trainers."
                            "verl_sampler)."}
    return type("WeightedRLHFDataset", (base,), namespace)


def __getattr__(name: str) -> Any:
    builders = {"WeightedSampler": weighted_sampler_class, "WeightedRLHFDataset": weighted_dataset_class}
    if name in builders:
        cls = builders[name]()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
