"""A run's training, in process or in processes of its own.

`coevolve-engine run` trains through ``train_round(spec, echo)``: each round, and the warm-up (a spec whose
``label`` is empty: it writes no rollouts, and it runs in the run's own process). With ``trainer.launcher`` set (for
example ``accelerate launch --num_processes 8``), it runs this module under that launcher instead:

    accelerate launch --num_processes 8 -m coevolve_engine.loop.train_round ROUND_SPEC.json

Every process builds the same trainer from the spec (the tasks and weights come from the store, read-only),
the trainer gathers rollouts to its main process, which alone writes them to the store and saves the
checkpoint, and the main process writes the result next to the spec for the run to record. The run itself
stays one process: it waits for the launched command and goes on with the round's other phases.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.sink import StoreSink
from coevolve_engine.display.progress import advance, detail
from coevolve_engine.trainers import TRAINERS, BatchSource, TrainContext

if TYPE_CHECKING:
    from coevolve_engine.core.environment import Environment


class SpecError(CoevolveError):
    """A round spec file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class TrainSpec:
    """What one training is given: a round's, or the warm-up's. The run's train and warmup phases build it from
    its configuration (every value is decided there: no field has a default of its own), and a launched
    training reads it back from the JSON file the run wrote (``to_json`` / ``from_json``), so every field is a
    JSON value."""

    db: str  # the store, an absolute path
    wait: float  # seconds a store open waits for another process's write
    env: str
    env_options: dict[str, Any]
    round: int  # the round whose weights the batches are drawn from
    trainer: str  # a name in the trainer registry
    model: str  # the policy the round starts from
    resume_from: str  # a checkpoint whose optimization the round continues; empty: a fresh one
    reference_model: str  # the KL reference
    options: dict[str, Any]  # the trainer's own options, with the run's [episode] settings it declares
    output_dir: str  # where the round's checkpoint is written
    seed: int
    start_step: int  # the step before the round's first
    steps: int
    schedule_steps: int  # the optimizer steps the learning-rate schedule spans from the optimization's first
    policy_name: str
    steps_per_write: int
    label: str  # names the rollouts' writes in the ingests table; "": the training writes no rollouts (warm-up)
    echo_label: str  # the phase's label on the run's screen
    run_pid: int | None = None  # set for a launched training: the run's process, which it stops without

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str, where: str = "round spec") -> "TrainSpec":
        """The spec a run wrote; a file from another version (a field missing or unknown) is refused by name."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(f"{where}: not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise SpecError(f"{where}: a round spec is a JSON object, got {type(data).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        missing = sorted(name for name, f in fields.items()
                         if name not in data and f.default is dataclasses.MISSING)
        if unknown or missing:
            said = [f"unknown field(s) {', '.join(unknown)}"] if unknown else []
            said += [f"missing field(s) {', '.join(missing)}"] if missing else []
            raise SpecError(f"{where}: {'; '.join(said)} (written by another version of coevolve-engine? rerun "
                            "`coevolve-engine run` to write it again)")
        return cls(**data)


def train_round(spec: TrainSpec, echo: Callable[[str], None] = print,
                environment: Environment | None = None) -> dict[str, Any] | None:
    """Train as ``spec`` says; the result (checkpoint, steps, groups, rollouts, the trainer's ``summary`` when it
    has one, ...) on the process that saved the checkpoint, None on the others. ``environment``: the run's own,
    when it trains in the run's process; a launched training loads one from ``spec.env``."""
    db = Path(spec.db)
    if environment is None:
        environment = load_environment(spec.env, **spec.env_options)
    source = BatchSource.from_store(db, spec.round, seed=spec.seed, wait=spec.wait)
    sink = None
    if spec.label:
        sink = ProgressSink(StoreSink(db, wait=spec.wait, label=spec.label, steps_per_write=spec.steps_per_write),
                            echo, spec.echo_label, spec.start_step + 1, spec.steps)
    context = TrainContext(store_path=db, env=spec.env, environment=environment, seed=spec.seed, wait=spec.wait,
                           source=source, sink=sink, model=spec.model, output_dir=spec.output_dir,
                           start_step=spec.start_step, policy_name=spec.policy_name, resume_from=spec.resume_from,
                           reference_model=spec.reference_model, schedule_steps=spec.schedule_steps)
    trainer = TRAINERS.build(spec.trainer, spec.options, context)
    trainer.progress = lambda line: detail(echo, f"{spec.echo_label} {line}")  # the trainer's own lines, logged
    report = trainer.train(spec.steps)
    if sink is not None:
        sink.flush()  # steps a trainer left with the sink (steps_per_write > 1) are in the store before the result
    if report.checkpoint is None:
        return None
    result = {"checkpoint": str(report.checkpoint), "steps": report.steps, "groups": report.groups,
              "rollouts": report.rollouts, "seconds_per_step": round(report.seconds_per_step, 3),
              "store_writes": getattr(sink.sink, "writes", 0) if sink else 0,
              "store_seconds": round(sink.store_seconds, 3) if sink else 0.0, **peak_memory()}
    summary = getattr(trainer, "summary", None)
    return {**result, "summary": dict(summary)} if summary is not None else result


def peak_memory() -> dict[str, int]:
    """This process's peak resident memory, and the accelerator's peak allocation when one was used (bytes)."""
    peak = {"peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}  # Linux: KiB
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        peak["peak_accelerator_bytes"] = int(torch.cuda.max_memory_allocated())
    return peak


class ProgressSink:
    """Passes each group (or a step's groups) to the store sink, then reports them (the rollouts are in the
    store when it shows): a detail line per group (the log, or the screen with --verbose) and the phase's bar
    moved on."""

    def __init__(self, sink, echo: Callable[[str], None], label: str, first: int, steps: int) -> None:
        self.sink, self.echo, self.label, self.first, self.steps = sink, echo, label, first, steps
        self.groups = self.rollouts = self.solved = 0
        self._unreported: list = []  # (groups, step) the store sink keeps, not yet written

    @property
    def store_seconds(self) -> float:
        return getattr(self.sink, "store_seconds", 0.0)

    def write_group(self, rollouts, *, step: int, group_id: str) -> None:
        self.sink.write_group(rollouts, step=step, group_id=group_id)
        self._written([(group_id, rollouts)], step)

    def write_groups(self, groups, *, step: int) -> None:
        self.sink.write_groups(groups, step=step)
        self._unreported.append((groups, step))
        if not getattr(self.sink, "pending", 0):  # shown once they are in the store
            self._report()

    def flush(self) -> None:
        if hasattr(self.sink, "flush"):
            self.sink.flush()
        self._report()

    def _report(self) -> None:
        for groups, step in self._unreported:
            self._written(groups, step)
        self._unreported = []

    def _written(self, groups, step: int) -> None:
        for group_id, rollouts in groups:
            self.groups += 1
            self.rollouts += len(rollouts)
            solved = sum(1 for r in rollouts if r.success)
            self.solved += solved
            detail(self.echo, f"{self.label} step {step - self.first + 1}/{self.steps}: group {group_id} written "
                              f"({solved}/{len(rollouts)} succeeded)")
        advance(self.echo, done=step - self.first + 1, rollouts=self.rollouts,
                success=self.solved / self.rollouts if self.rollouts else None)


def result_path(spec_path: Path) -> Path:
    return spec_path.with_suffix(".result.json")


def quiet_libraries() -> None:
    """Progress bars of model loading and saving would bury the run's own lines."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from datasets.utils import logging as datasets_logging
        from transformers.utils import logging as transformers_logging
    except ImportError:  # the trainer's extra is not installed; the run says so when it needs it
        return
    transformers_logging.disable_progress_bar()
    datasets_logging.disable_progress_bar()  # TRL's SFT dataset preparation


def _exit_with(run_pid: int) -> None:
    """Stop this process when the run that launched it is gone (killed, even with -9): a training left behind
    would go on writing rollouts into a round the resumed run is training again."""
    def watch() -> None:
        while True:
            try:
                os.kill(run_pid, 0)
            except ProcessLookupError:
                os._exit(3)
            except PermissionError:  # alive, owned by someone else
                pass
            time.sleep(1.0)

    threading.Thread(target=watch, name="run-watchdog", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m coevolve_engine.loop.train_round ROUND_SPEC.json (written by coevolve-engine run)",
              file=sys.stderr)
        return 2
    spec_path = Path(args[0])
    spec = TrainSpec.from_json(spec_path.read_text(encoding="utf-8"), str(spec_path))
    if spec.run_pid:
        _exit_with(spec.run_pid)
    quiet_libraries()
    result = train_round(spec, echo=lambda line: print(line, flush=True))
    if result is not None:
        result_path(spec_path).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
