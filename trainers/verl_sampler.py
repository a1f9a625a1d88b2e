"""A verl sampler that draws the rows of an exported round by their weights.

Point verl at it (``coevolve-engine export --format verl`` writes the weights into each row's
``extra_info.weight``). verl releases whose ``create_rl_sampler`` reads ``data.sampler`` (the GitHub tree
of January 2026, ``verl/trainer/main_ppo.py``) take it from the config::

    data.sampler.class_path=pkg://coevolve_engine.trainers.verl_sampler
    data.sampler.class_name=WeightedSampler
    data.dataloader_num_workers=0          # verl requires it for custom samplers

verl 0.9 (PyPI) dropped that hook; there, build it in your entry point and pass it to the trainer:
``RayPPOTrainer(..., train_sampler=WeightedSampler(train_dataset, config.data))``.

Options, read from ``data.sampler`` (all optional): ``seed`` (default ``data.seed``, else 0), ``num_samples``
(draws per epoch, default the number of rows) and ``weight_key`` (default ``extra_info.weight``).

Each epoch draws ``num_samples`` row indices with replacement, row i with probability
``w_i / sum(w)``, from a generator seeded with ``seed + epoch``: the same seed gives the same draws in every
process, and the sampler holds nothing but the weights, the seed and the epoch (``state_dict`` /
``load_state_dict`` carry the epoch across a resume). verl is never imported when this module is: verl
checks ``isinstance(sampler, AbstractSampler)``, so ``WeightedSampler`` is built on first use, on top of
verl's ``AbstractSampler`` when verl is installed and on ``torch.utils.data.Sampler`` otherwise.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from typing import Any, Iterator, Sequence

import torch
from torch.utils.data import Sampler

from coevolve_engine.errors import CoevolveError

DEFAULT_WEIGHT_KEY = "extra_info.weight"
_VERL_SAMPLER_MODULE = "verl.experimental.dataset.sampler"


class SamplerConfigError(CoevolveError, ValueError):
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


class WeightedTaskSampler(Sampler[int]):
    """Draws row indices with replacement in proportion to the rows' weights (see the module doc)."""

    def __init__(self, data_source: Any, data_config: Any = None, *, weights: Sequence[float] | None = None):
        options = _option(data_config, "sampler")
        key = _option(options, "weight_key", DEFAULT_WEIGHT_KEY)
        if weights is None:
            weights = read_weights(data_source, key)
        self.weights = tuple(float(w) for w in weights)
        self.seed = int(_option(options, "seed", _option(data_config, "seed", 0)))
        self.num_samples = int(_option(options, "num_samples", len(self.weights)))
        if self.num_samples < 1:
            raise SamplerConfigError(f"data.sampler.num_samples must be at least 1, got {self.num_samples}")
        self.epoch = 0

    def __len__(self) -> int:
        return self.num_samples

    def draws(self, epoch: int) -> list[int]:
        """The indices epoch ``epoch`` yields; a pure function of the weights, the seed and the epoch."""
        generator = torch.Generator().manual_seed(self.seed + epoch)
        weights = torch.tensor(self.weights, dtype=torch.float64)
        return torch.multinomial(weights, self.num_samples, replacement=True, generator=generator).tolist()

    def __iter__(self) -> Iterator[int]:
        epoch, self.epoch = self.epoch, self.epoch + 1
        return iter(self.draws(epoch))

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "seed": self.seed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch = int(state["epoch"])
        self.seed = int(state.get("seed", self.seed))

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


def __getattr__(name: str) -> Any:
    if name == "WeightedSampler":
        cls = weighted_sampler_class()
        globals()["WeightedSampler"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
