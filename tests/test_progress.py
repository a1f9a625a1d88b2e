"""What a long command shows (coevolve_engine.display.progress): a bar per phase on a terminal, plain lines now and then
elsewhere, detail lines in the log; and the demo, run on a real terminal (a pty) and with its output
redirected."""

from __future__ import annotations

import fcntl
import importlib.util
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

from coevolve_engine.display.progress import Display, advance, detail, progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_plain_echo_gets_every_line_and_no_bar():
    lines: list[str] = []
    with progress(lines.append, "round 0 · train", total=3) as bar:
        detail(lines.append, "group a written")
        advance(lines.append, done=1, rollouts=8, success=0.5)
        bar.update(done=2)
    assert lines == ["group a written"]


def test_redirected_output_gets_plain_periodic_lines_and_the_log_every_line(tmp_path):
    out = io.StringIO()
    display = Display(stream=out, log=tmp_path / "run.log", interval=0.0)
    display("round 0 · weights done in 0.1 s")
    with progress(display, "round 0 · train", total=4, unit="step"):
        for step in range(1, 5):
            detail(display, f"round 0 · train step {step}/4: group g{step} written (2/4 succeeded)")
            advance(display, done=step, rollouts=4 * step, success=0.5)
    display("round 0 · train done in 2.0 s")
    display.close()
    shown = out.getvalue().splitlines()
    assert shown[0] == "round 0 · weights done in 0.1 s" and shown[-1] == "round 0 · train done in 2.0 s"
    assert not any("written" in line for line in shown)  # no line per group
    assert re.fullmatch(r"round 0 · train 4/4 steps, rollouts 16, success 50%, \d+ s", shown[-2])
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    log = (tmp_path / "run.log").read_text()
    assert log.count("written (2/4 succeeded)") == 4 and "weights done" in log


def test_verbose_shows_the_detail_too():
    out = io.StringIO()
    display = Display(stream=out, verbose=True, interval=3600)
    with progress(display, "round 0 · validate", unit="candidate"):
        detail(display, "round 0 · validate 1: c1 accepted (accepted)")
    assert out.getvalue().splitlines() == ["round 0 · validate 1: c1 accepted (accepted)"]


def test_a_terminal_gets_a_bar_with_the_running_figures():
    pytest.importorskip("tqdm")
    out = Terminal()
    display = Display(stream=out)
    assert display.live
    with progress(display, "round 0 · train", total=4, unit="step"):
        advance(display, done=2, rollouts=16, success=0.25)
        display("a line printed above the bar")
    text = out.getvalue()
    assert "round 0 · train:" in text and "2/4" in text and "rollouts 16, success 25%" in text
    assert "a line printed above the bar" in text


def test_a_trainer_line_moves_a_bar_that_counts_steps():
    out = io.StringIO()
    display = Display(stream=out, interval=0.0)
    with progress(display, "round 0 · warmup", total=150) as bar:
        detail(display, "round 0 · warmup step 45/150: loss 1.2345")
        assert bar.done == 45
        detail(display, "round 0 · warmup step 3/7: a line of something else")
        assert bar.done == 45
    with progress(display, "round 0 · bootstrap", total=100, unit="task") as bar:
        detail(display, "round 0 · bootstrap accepted 12 so far in this run; 31 of 100 in the store")
        assert bar.done == 31


# -- the demo on a terminal and redirected ----------------------------------------------------------------

needs_trainer = pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("torch", "trl")),
                                   reason="the demo needs the trl extra")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TERM": "xterm"}


def on_a_terminal(command: list[str], timeout: float = 900) -> str:
    """Run ``command`` on a pseudo-terminal of 120 x 40; everything it drew, escape codes included."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=ENV, close_fds=True)
    os.close(slave)
    drawn, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            drawn += chunk
        elif process.poll() is not None:
            break
    process.wait(timeout=60)
    os.close(master)
    assert process.returncode == 0, drawn.decode(errors="replace")[-3000:]
    return drawn.decode("utf-8", errors="replace")


def lines_left(drawn: str) -> list[str]:
    """The lines a person sees once the command ended: each line as its last carriage return left it."""
    seen = []
    for line in drawn.replace("\r\n", "\n").split("\n"):
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line.split("\r")[-1]).strip()
        if text:
            seen.append(text)
    return seen


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo-display")
    command = [sys.executable, "-m", "coevolve_engine.cli", "demo", "--quick", "--dir", str(folder)]
    drawn = on_a_terminal([*command, "--rounds", "1"])
    redirected = subprocess.run([*command, "--rounds", "2"], capture_output=True, text=True, env=ENV, timeout=900)
    assert redirected.returncode == 0, redirected.stderr[-3000:]
    return folder, drawn, redirected.stdout


@needs_trainer
def test_on_a_terminal_the_demo_shows_bars_and_a_few_lines_a_round(demo_runs):
    folder, drawn, _ = demo_runs
    assert re.search(r"round 0 · train: +\d+%\|", drawn)          # a live bar for training
    assert re.search(r"round 0 · warmup: +\d+%\|", drawn)         # and for the warm-up
    assert "rollouts" in drawn and "success" in drawn             # with its running figures
    seen = lines_left(drawn)
    round_lines = [line for line in seen if line.startswith("round 0")]
    assert 1 <= len(round_lines) <= 10, round_lines
    assert round_lines[-1].startswith("round 0 finished in ") and "held-out" in round_lines[-1]
    assert not any("written (" in line for line in seen)           # no line per group
    assert any(line.startswith(f"The report: {folder / 'report.html'}") for line in seen)


@needs_trainer
def test_redirected_the_demo_prints_plain_lines_none_per_group(demo_runs):
    folder, _, printed = demo_runs
    assert "\r" not in printed and "\x1b[" not in printed
    assert "written (" not in printed
    round_lines = [line for line in printed.splitlines() if line.startswith("round 1")]
    assert round_lines[-1].startswith("round 1 finished in ") and len(round_lines) <= 12
    log = (folder / "run.log").read_text()
    assert "round 0 · train" in log and "written (" in log          # the detail is in the log
    page = (folder / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and 'id="headline"' in page
