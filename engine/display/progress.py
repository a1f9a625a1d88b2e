"""What a long command shows while it works: one live bar per phase on a terminal, a plain line now and then
when the output goes to a file or a pipe, and the per-item detail in a log file (or on screen with --verbose).

The loop and the phases print through an ``echo`` callable. A plain one (``print``, a list's ``append``)
gets every line, as before. A ``Display`` is an echo too, and more:

    display = Display(log=folder / "run.log")      # a bar on a terminal, periodic lines otherwise
    display("round 0 · train done in 31 s: ...")   # a line that stays (printed above the bar)
    detail(display, "group calc/x@3 written")      # the log file only (on screen with verbose=True)
    with progress(display, "round 0 · train", total=25, unit="step") as bar:
        bar.update(done=3, rollouts=24, success=0.42)

``detail`` and ``progress`` take any echo: with a plain one, ``detail`` prints the line and ``progress`` shows
nothing, so code that reports progress works the same under a test's list of lines.
"""

from __future__ import annotations

import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TextIO

Echo = Callable[[str], None]

#: "step 12/150" in a trainer's line, "31 of 100 in the store" in the bootstrap's: where a bar with no count of
#: its own reads one (only when the second number is the bar's total)
_COUNTS = (re.compile(r"\bstep (\d+)/(\d+)\b"), re.compile(r"\b(\d+) of (\d+) in the store\b"))


def detail(echo: Echo, line: str) -> None:
    """A line about one item (a group written, a candidate's verdict): logged; shown only with a plain echo or
    a verbose display."""
    getattr(echo, "detail", echo)(line)


def advance(echo: Echo, *, done: int | None = None, advance: int = 0, **figures: Any) -> None:
    """Move the current phase's bar on (to ``done``, or by ``advance``) and update its running figures (a float
    shows as a percentage); nothing when ``echo`` is not a ``Display`` or no bar is open."""
    bar = getattr(echo, "current", None)
    if bar is not None:
        bar.update(done=done, advance=advance, **figures)


@contextmanager
def progress(echo: Echo, label: str, *, total: int | None = None, unit: str = "step") -> Iterator["Bar"]:
    """A progress bar for one phase when ``echo`` is a ``Display``; one that shows nothing otherwise."""
    start = getattr(echo, "bar", None)
    bar = start(label, total=total, unit=unit) if start else Bar()
    try:
        yield bar
    finally:
        bar.close()


class Bar:
    """The bar of one phase. ``update(done=..., advance=..., **figures)``; this base class shows nothing."""

    def update(self, *, done: int | None = None, advance: int = 0, **figures: Any) -> None:
        pass

    def note(self, line: str) -> None:
        """A detail line; a bar that counts reads "step N/M" or "N of M in the store" in it."""

    def close(self) -> None:
        pass


class Display:
    """An echo for a person: lines that stay, one bar per long phase, detail to ``log`` (and the screen when
    ``verbose``). ``stream`` is where it writes (standard output by default); ``live`` draws bars in place
    (default: when the stream is a terminal), otherwise a plain progress line every ``interval`` seconds."""

    def __init__(self, *, stream: TextIO | None = None, live: bool | None = None, verbose: bool = False,
                 log: Path | None = None, interval: float = 30.0) -> None:
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.verbose, self.interval = verbose, interval
        self.log_file = open(log, "a", encoding="utf-8") if log is not None else None  # noqa: SIM115
        self.current: _PhaseBar | None = None

    def __call__(self, line: str) -> None:
        self._log(line)
        self._show(line)

    def detail(self, line: str) -> None:
        self._log(line)
        if self.current is not None:
            self.current.note(line)
        if self.verbose:
            self._show(line)

    def bar(self, label: str, *, total: int | None, unit: str) -> Bar:
        self.current = _PhaseBar(self, label, total, unit)
        return self.current

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
        if self.log_file is not None:
            self.log_file.close()
            self.log_file = None

    def _show(self, line: str) -> None:
        if self.current is not None and self.current.tqdm is not None:
            self.current.tqdm.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def _log(self, line: str) -> None:
        if self.log_file is not None:
            self.log_file.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")
            self.log_file.flush()


class _PhaseBar(Bar):
    """A tqdm bar on a terminal; a line every ``interval`` seconds elsewhere."""

    def __init__(self, display: Display, label: str, total: int | None, unit: str) -> None:
        self.display, self.label, self.total, self.unit = display, label, total, unit
        self.done = 0
        self.figures: dict[str, Any] = {}
        self.started = self.shown = time.monotonic()
        self.tqdm = None
        if display.live:
            try:
                from tqdm import tqdm
            except ImportError:  # the agents extra is not installed: periodic lines instead
                tqdm = None
            if tqdm is not None:
                self.tqdm = tqdm(total=total, desc=label.rstrip(), unit=unit, file=display.stream, leave=False,
                                 dynamic_ncols=True, mininterval=0.5)

    def update(self, *, done: int | None = None, advance: int = 0, **figures: Any) -> None:
        before = self.done
        self.done = done if done is not None else self.done + advance
        self.figures.update(figures)
        if self.tqdm is not None:
            self.tqdm.set_postfix_str(self._figures(), refresh=False)
            self.tqdm.update(self.done - before)
        elif time.monotonic() - self.shown >= self.display.interval:
            self.shown = time.monotonic()
            print(self.line(), file=self.display.stream, flush=True)

    def note(self, line: str) -> None:
        for pattern in _COUNTS:
            found = pattern.search(line)
            if found and self.total is not None and int(found.group(2)) == self.total:
                self.update(done=int(found.group(1)))
                return

    def line(self) -> str:
        """The plain progress line: where the phase is, its running figures and the time it has left."""
        count = f"{self.done}/{self.total}" if self.total else str(self.done)
        elapsed = time.monotonic() - self.started
        left = ""
        if self.total and 0 < self.done < self.total:
            left = f", about {_duration(elapsed * (self.total - self.done) / self.done)} left"
        figures = self._figures()
        return f"{self.label} {count} {self.unit}s{', ' + figures if figures else ''}, {_duration(elapsed)}{left}"

    def _figures(self) -> str:
        shown = []
        for name, value in self.figures.items():
            if value is None:
                continue
            shown.append(f"{name} {100 * value:.0f}%" if isinstance(value, float) else f"{name} {value}")
        return ", ".join(shown)

    def close(self) -> None:
        if self.tqdm is not None:
            self.tqdm.close()
            self.tqdm = None
        if self.display.current is self:
            self.display.current = None


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"
