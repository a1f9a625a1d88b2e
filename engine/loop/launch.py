"""A round's training in processes of its own: ``LAUNCHER -m coevolve_engine.loop.train_round SPEC``.

With ``trainer.launcher`` set (e.g. ``accelerate launch --num_processes 8``), the train phase writes the round's
spec next to its checkpoints, runs the launcher on ``coevolve_engine.loop.train_round`` and echoes its lines;
the process that saved the checkpoint writes the result beside the spec. The launched processes stop by
themselves when the run that launched them is gone (``train_round._exit_with``).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from coevolve_engine.loop.context import RunError
from coevolve_engine.loop.train_round import TrainSpec, result_path
from coevolve_engine.display.progress import detail


def launch(spec: TrainSpec, launcher: str, echo: Callable[[str], None]) -> dict[str, Any] | None:
    """Run the round's training under ``launcher``, echoing its lines; the result, or None when no process
    saved a checkpoint."""
    folder = Path(spec.output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    spec_path = folder / "round-spec.json"
    spec_path.write_text(replace(spec, run_pid=os.getpid()).to_json(), encoding="utf-8")
    result_path(spec_path).unlink(missing_ok=True)
    command = [*shlex.split(launcher), "-m", "coevolve_engine.loop.train_round", str(spec_path)]
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as exc:  # the run checks the launcher before a round; it may have gone since
        raise RunError(f"trainer.launcher: cannot start {shlex.join(command)}: {exc.strerror or exc}") from None
    assert process.stdout is not None
    for line in process.stdout:
        detail(echo, line.rstrip("\n"))
    if process.wait() != 0:
        raise RunError(f"the launched training exited with status {process.returncode}: {shlex.join(command)}")
    if not result_path(spec_path).exists():
        return None
    return json.loads(result_path(spec_path).read_text(encoding="utf-8"))
