"""Figures of drift reports (PNG), drawn with matplotlib's Agg backend: no display, no network.

matplotlib is an optional dependency (the ``report`` extra) and is imported only when a figure is drawn.
Each figure takes one report, or two side by side (``--compare``): lines of both runs share the axes.
"""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl

from coevolve_engine.core.outputs import check_output, write_output
from coevolve_engine.drift.metrics import DriftReport
from coevolve_engine.core.errors import CoevolveError

#: every figure; the report leads with KEY_FIGURES (the result) and folds the others below
FIGURES = ("heldout", "signals", "growth", "acceptance", "eval", "distribution", "patterns", "success", "diversity",
           "eval_similarity", "group_health")
KEY_FIGURES = FIGURES[:4]
#: a store of ingested rollouts (a report over step windows) leads with these, then those of FIGURES with data
STEP_FIGURES = ("signals_steps", "success", "task_drift")
_SIGNALS = ("forgetting", "boundary", "rare")
_BIN_COLORS = {-1.0: "C0", 0.5: "C1", 0.7: "C2", 0.9: "C3"}  # drift_eval_similarity's bins, by lower edge


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise CoevolveError("figures need matplotlib, from the report extra: pip install 'coevolve-engine[report]'"
                            ) from exc
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _rounds(report: DriftReport) -> list[int]:
    return report["rounds"]["round"].to_list()


def _round_starts(report: DriftReport) -> list[int]:
    """The first steps of the report's rounds after the first (where a figure draws a round boundary); none over
    step windows, which are no rounds."""
    return [] if report.by_steps else report["rounds"]["first_step"].drop_nulls().to_list()[1:]


def _gaps(report: DriftReport) -> list[tuple[int, int]]:
    """The gaps in the report's steps with scored rollouts, as (last step before, first step after): two
    consecutive steps further apart than the closest two (what drift_rounds and ``_gapped`` call a gap)."""
    known = sorted(set(report["steps"]["step"].to_list())) if "steps" in report.tables else []
    spacing = min((b - a for a, b in zip(known, known[1:])), default=1)
    return [(a, b) for a, b in zip(known, known[1:]) if b - a > spacing]


def _shade_gaps(ax, report: DriftReport) -> None:
    """A light band over each gap in the steps, so the break in a line reads as "no data", not as a drop."""
    for index, (before, after) in enumerate(_gaps(report)):
        ax.axvspan(before + 0.5, after - 0.5, color="0.92", zorder=0, label="no data" if index == 0 else None)


def _gapped(report: DriftReport, steps, *series):
    """``steps`` and each of ``series`` with a NaN between two steps that have no data between them, so a line
    breaks there instead of crossing steps with no data. A gap is what drift_rounds calls one: two consecutive
    plotted steps further apart than the closest two steps with scored rollouts."""
    steps = [int(s) for s in steps]
    known = sorted(set(report["steps"]["step"].to_list())) if "steps" in report.tables else steps
    spacing = min((b - a for a, b in zip(known, known[1:])), default=1)
    values = [list(column) for column in series]
    out_steps: list[float] = []
    out_series: list[list[float]] = [[] for _ in series]
    for i, step in enumerate(steps):
        if i and step - steps[i - 1] > spacing:
            out_steps.append(float("nan"))
            for column in out_series:
                column.append(float("nan"))
        out_steps.append(step)
        for column, given in zip(out_series, values):
            column.append(float("nan") if given[i] is None else float(given[i]))
    return (out_steps, *out_series)


def distribution(reports: list[DriftReport], top: int = 30):
    """Per run: each task's sampling probability per round (a heat map, rows named by task id: the ``top`` tasks
    whose probability moved most when there are more), and the Jensen-Shannon divergences."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, len(reports), figsize=(6 * len(reports), 7), squeeze=False)
    for column, report in enumerate(reports):
        heat, js = axes[0][column], axes[1][column]
        sets = report.tables.get("task_sets")
        weights = report["weights"]
        if sets is not None and sets.height and sets["probability"].drop_nulls().len():
            known = sets.filter(pl.col("probability").is_not_null())
            moved = (known.group_by("task_id")
                     .agg((pl.col("probability").max() - pl.col("probability").min()).alias("moved"),
                          pl.col("probability").max().alias("highest"))
                     .sort(["moved", "highest", "task_id"], descending=[True, True, False]).head(top)["task_id"])
            grid = (known.filter(pl.col("task_id").is_in(moved.to_list()))
                    .pivot(on="round", index="task_id", values="probability").fill_null(0.0).sort("task_id"))
            columns = sorted((c for c in grid.columns if c != "task_id"), key=int)
            image = heat.imshow(grid.select(columns).to_numpy(), aspect="auto", interpolation="nearest", cmap="viridis")
            heat.set_xticks(range(len(columns)), columns)
            heat.set_yticks(range(grid.height), grid["task_id"].to_list(), fontsize=6 if grid.height > 15 else 7)
            fig.colorbar(image, ax=heat, label="probability")
            if known["task_id"].n_unique() > top:
                heat.set_title(f"{report.label}: task distribution (the {top} tasks that moved most)", fontsize=9)
        else:
            heat.text(0.5, 0.5, "no weight sets", ha="center", va="center")
        if not heat.get_title():
            heat.set_title(f"{report.label}: task distribution")
        heat.set_xlabel("round")
        if weights.height:
            js.plot(weights["round"], weights["js_previous"], marker="o", label="JS from previous round")
            js.plot(weights["round"], weights["js_round0"], marker="s", label="JS from first round")
            js.set_xticks(weights["round"].to_list())
            js.legend()
        js.set_xlabel("round")
        js.set_ylabel("Jensen-Shannon divergence (bits)")
    fig.tight_layout()
    return fig


def signals(reports: list[DriftReport]):
    """Flagged rollouts per signal per round (bars), one panel per run."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(reports), figsize=(6 * len(reports), 3.3), squeeze=False)
    for ax, report in zip(axes[0], reports):
        frame = report["signals"]
        rounds = frame["round"].to_list()
        width = 0.8 / len(_SIGNALS)
        for i, signal in enumerate(_SIGNALS):
            ax.bar([r + (i - 1) * width for r in rounds], frame[signal].to_list(), width, label=signal)
        ax.set_xticks(rounds)
        ax.set_title(f"{report.label}: flagged rollouts by signal")
        ax.set_xlabel("round")
        ax.set_ylabel("rollouts")
        ax.legend()
    fig.tight_layout()
    return fig


def patterns(reports: list[DriftReport], top: int = 8):
    """Each pattern lineage's share of its round (stacked bars; lineages beyond the top ``top`` as 'other')."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(reports), figsize=(7 * len(reports), 4.5), squeeze=False)
    for ax, report in zip(axes[0], reports):
        frame = report["patterns"].filter(pl.col("size") > 0)
        if not frame.height:
            ax.text(0.5, 0.5, "no failure patterns", ha="center", va="center")
        else:
            leading = (frame.group_by("lineage").agg(pl.col("share").sum()).sort(["share", "lineage"],
                       descending=[True, False]).head(top)["lineage"].to_list())
            frame = frame.with_columns(pl.when(pl.col("lineage").is_in(leading)).then(pl.col("lineage"))
                                       .otherwise(pl.lit("other")).alias("lineage"))
            rounds = sorted(frame["round"].unique().to_list())
            bottom = [0.0] * len(rounds)
            for lineage in leading + (["other"] if "other" in frame["lineage"].to_list() else []):
                shares = [frame.filter((pl.col("round") == r) & (pl.col("lineage") == lineage))["share"].sum()
                          for r in rounds]
                ax.bar(rounds, shares, bottom=bottom, label=lineage)
                bottom = [b + s for b, s in zip(bottom, shares)]
            ax.set_xticks(rounds)
            ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1, 0.5))
        ax.set_title(f"{report.label}: failure pattern shares")
        ax.set_xlabel("round")
        ax.set_ylabel("share of the round's pattern members")
    fig.tight_layout()
    return fig


def success(reports: list[DriftReport]):
    """Success rate against training step (every run on one axes), round boundaries dashed."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for report in reports:
        steps = report["steps"].sort("step")
        ax.plot(*_gapped(report, steps["step"], steps["success_rate"]), marker=".", label=report.label)
    _shade_gaps(ax, reports[0])
    by_rounds = not reports[0].by_steps
    for first in _round_starts(reports[0]):
        ax.axvline(first - 0.5, color="grey", linestyle="--", linewidth=0.8)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("training step")
    ax.set_ylabel("training success rate")
    ax.set_title("training success against step" + (" (dashed: round boundaries)" if by_rounds else ""))
    ax.legend()
    fig.tight_layout()
    return fig


def group_health(reports: list[DriftReport]):
    """The share of each step's GRPO groups that were dead (every reward equal: no gradient) and the share of its
    rollouts that carry gradient, against training step (every run on one axes; group_health), round boundaries
    dashed."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for index, report in enumerate(reports):
        health = report.tables.get("group_health")
        if health is None or not health.height:
            continue
        color = f"C{index}"
        steps, dead, gradient = _gapped(report, health["step"], health["dead_share"], health["gradient_share"])
        ax.plot(steps, dead, marker=".", color=color, label=f"{report.label}: dead groups")
        ax.plot(steps, gradient, linestyle=":", marker="x", markersize=3, color=color,
                label=f"{report.label}: rollouts with gradient")
    _shade_gaps(ax, reports[0])
    for first in _round_starts(reports[0]):
        ax.axvline(first - 0.5, color="grey", linestyle="--", linewidth=0.8)
    if not any(r.tables.get("group_health") is not None and r["group_health"].height for r in reports):
        ax.text(0.5, 0.5, "no scored rollouts", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("training step")
    ax.set_ylabel("share")
    ax.set_title("GRPO group health against step" + ("" if reports[0].by_steps else " (dashed: round boundaries)"))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def diversity(reports: list[DriftReport]):
    """SR@k (self-redundancy, lower is more diverse) and ED_rel to the previous round, per round."""
    plt = _pyplot()
    fig, (sr, ed) = plt.subplots(1, 2, figsize=(10, 4))
    for report in reports:
        frame = report.tables.get("diversity")
        if frame is None:
            continue
        sr.plot(frame["round"], frame["sr_at_k"], marker="o", label=report.label)
        ed.plot(frame["round"], frame["ed_rel"], marker="o", label=report.label)
    sr.set_title(f"SR@{reports[0].params.k} of task prompts (lower: more diverse)")
    period = "window" if reports[0].by_steps else "round"
    ed.set_title(f"ED_rel of each {period}'s task set to the previous one's")
    first = reports[0]
    for ax in (sr, ed):
        rounds = first["rounds"]["round"].to_list()
        ax.set_xticks(rounds, [first.period(r).split(" ", 1)[1] for r in rounds] if first.by_steps else rounds)
        ax.set_xlabel("training steps" if first.by_steps else "round")
        ax.legend()
    fig.tight_layout()
    return fig


def eval_success(reports: list[DriftReport]):
    """The paper's Figure 3: success on the held-out (eval) tasks against training step (every run on one axes),
    above the rollouts each signal flagged per step (one panel per run), on the same steps."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, len(reports), figsize=(6 * len(reports), 6.5), squeeze=False, sharex="col")
    for column, report in enumerate(reports):
        top, bottom = axes[0][column], axes[1][column]
        steps = report["eval_steps"]
        evaluated = steps.filter(pl.col("eval_success").is_not_null())
        if evaluated.height:
            top.plot(evaluated["step"], evaluated["eval_success"], marker="o", label=f"{report.label}: eval")
            top.legend()
        else:
            top.text(0.5, 0.5, "no evaluations on the eval split", ha="center", va="center",
                     transform=top.transAxes)
        top.set_ylim(-0.02, 1.02)
        top.set_ylabel("success on the eval split")
        top.set_title(f"{report.label}: eval success and flagged rollouts against step")
        flagged = steps.filter(pl.col("rollouts") > 0).sort("step")
        for signal in _SIGNALS:
            bottom.plot(*_gapped(report, flagged["step"], flagged[signal]), marker=".", label=signal)
        for first in _round_starts(report):
            for ax in (top, bottom):
                ax.axvline(first - 0.5, color="grey", linestyle="--", linewidth=0.8)
        bottom.set_xlabel("training step")
        bottom.set_ylabel("flagged rollouts")
        bottom.legend()
    fig.tight_layout()
    return fig


def eval_similarity(reports: list[DriftReport]):
    """Candidates per round by their prompt's highest similarity to the eval tasks (stacked bins; the accepted
    part of each bin solid, the rest hatched), one panel per run."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(reports), figsize=(6 * len(reports), 4), squeeze=False)
    for ax, report in zip(axes[0], reports):
        frame = report["eval_similarity"]
        if not frame.height:
            ax.text(0.5, 0.5, "no candidate measured against eval tasks", ha="center", va="center",
                    transform=ax.transAxes)
        else:
            rounds = sorted(frame["round"].unique().to_list())
            bottom = [0] * len(rounds)
            bins = frame.select("bin_low", "bin").unique().sort("bin_low").rows()
            for low, name in bins:
                part = frame.filter(pl.col("bin_low") == low)
                accepted = [part.filter(pl.col("round") == r)["accepted"].sum() for r in rounds]
                others = [part.filter(pl.col("round") == r)["candidates"].sum() - a for r, a in zip(rounds, accepted)]
                color = _BIN_COLORS.get(float(low), "C7")  # one colour per bin, in every run
                ax.bar(rounds, accepted, bottom=bottom, color=color, label=f"{name} accepted")
                bottom = [b + a for b, a in zip(bottom, accepted)]
                ax.bar(rounds, others, bottom=bottom, color="white", edgecolor=color, hatch="//",
                       label=f"{name} not accepted")
                bottom = [b + o for b, o in zip(bottom, others)]
            ax.set_xticks(rounds)
            ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1, 0.5))
        ax.set_title(f"{report.label}: candidates by similarity to the eval tasks")
        ax.set_xlabel("round")
        ax.set_ylabel("candidates")
    fig.tight_layout()
    return fig


def heldout(reports: list[DriftReport]):
    """Held-out success against training step, every run on one axes (drift_eval_steps), round boundaries
    dashed: the result at a glance."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.3))
    drawn = False
    for report in reports:
        evaluated = report["eval_steps"].filter(pl.col("eval_success").is_not_null())
        if evaluated.height:
            ax.plot(evaluated["step"], evaluated["eval_success"], marker="o", label=report.label)
            drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "no evaluations on the held-out tasks", ha="center", va="center", transform=ax.transAxes)
    for first in _round_starts(reports[0]):
        ax.axvline(first - 0.5, color="grey", linestyle="--", linewidth=0.8)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out success")
    ax.set_title("held-out success against step")
    if drawn:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def growth(reports: list[DriftReport]):
    """The task set per round (bars: seed and synthesized tasks) and its synthesized share (line), one panel per
    run (drift_synthesis)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(reports), figsize=(6 * len(reports), 3.3), squeeze=False)
    for ax, report in zip(axes[0], reports):
        frame = report["synthesis"].sort("round")
        if not frame.height:
            ax.text(0.5, 0.5, "no task sets (weight sets)", ha="center", va="center", transform=ax.transAxes)
        else:
            rounds = frame["round"].to_list()
            synthesized = [v or 0 for v in frame["synthesized"].to_list()]
            seed = [(t or 0) - s for t, s in zip(frame["tasks"].to_list(), synthesized)]
            ax.bar(rounds, seed, color="C0", label="seed tasks")
            ax.bar(rounds, synthesized, bottom=seed, color="C2", label="synthesized")
            share = ax.twinx()
            share.plot(rounds, [v or 0 for v in frame["synthesized_share"].to_list()], color="C3", marker="o",
                       label="synthesized share")
            share.set_ylim(0, 1)
            share.set_ylabel("synthesized share")
            ax.set_xticks(rounds)
            ax.legend(fontsize=8, loc="upper left")
        ax.set_title(f"{report.label}: task set by round")
        ax.set_xlabel("round")
        ax.set_ylabel("training tasks")
    fig.tight_layout()
    return fig


def acceptance(reports: list[DriftReport]):
    """Of the candidates synthesized for each signal's patterns, the share validation accepted, per round
    (drift_candidates), one panel per run."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(reports), figsize=(6 * len(reports), 3.3), squeeze=False)
    for ax, report in zip(axes[0], reports):
        frame = report["candidates"]
        if not frame.height:
            ax.text(0.5, 0.5, "no candidates", ha="center", va="center", transform=ax.transAxes)
        else:
            rounds = sorted(frame["round"].unique().to_list())
            signals = sorted({s or "unguided" for s in frame["signal"].to_list()})
            width = 0.8 / len(signals)
            for i, signal in enumerate(signals):
                part = frame.filter(pl.col("signal").fill_null("unguided") == signal)
                shares = [part.filter(pl.col("round") == r)["acceptance"].sum() for r in rounds]
                ax.bar([r + (i - (len(signals) - 1) / 2) * width for r in rounds], shares, width, label=signal)
            ax.set_xticks(rounds)
            ax.set_ylim(0, 1.05)
            ax.legend(fontsize=8)
        ax.set_title(f"{report.label}: candidates accepted, by signal")
        ax.set_xlabel("round")
        ax.set_ylabel("acceptance")
    fig.tight_layout()
    return fig


def signals_steps(reports: list[DriftReport]):
    """Rollouts each signal flagged at each training step (drift_eval_steps), one panel per run."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(reports), figsize=(6 * len(reports), 3.3), squeeze=False)
    for ax, report in zip(axes[0], reports):
        steps = report["eval_steps"].filter(pl.col("rollouts") > 0).sort("step")
        for signal in _SIGNALS:
            ax.plot(*_gapped(report, steps["step"], steps[signal]), marker=".", label=signal)
        _shade_gaps(ax, report)
        ax.set_title(f"{report.label}: flagged rollouts by signal, per step")
        ax.set_xlabel("training step")
        ax.set_ylabel("rollouts")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def task_drift(reports: list[DriftReport], top: int = 30):
    """Each task's training success per round or step window (a heat map; the ``top`` tasks whose success moved
    most when there are more), one panel per run."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(reports), figsize=(6 * len(reports), 4.5), squeeze=False)
    for ax, report in zip(axes[0], reports):
        frame = report["task_drift"]
        moved = (frame.group_by("task_id").agg((pl.col("success_rate").max() - pl.col("success_rate").min())
                                               .alias("moved"))
                 .sort(["moved", "task_id"], descending=[True, False]).head(top)["task_id"].to_list())
        grid = (frame.filter(pl.col("task_id").is_in(moved)).pivot(on="round", index="task_id", values="success_rate")
                .sort("task_id"))
        columns = sorted((c for c in grid.columns if c != "task_id"), key=int)
        image = ax.imshow(grid.select(columns).to_numpy().astype(float), aspect="auto", interpolation="nearest",
                          cmap="RdYlGn", vmin=0, vmax=1)
        labels = [report.period(int(c)).split(" ", 1)[1] if report.by_steps else c for c in columns]
        ax.set_xticks(range(len(columns)), labels, fontsize=7, rotation=90 if len(columns) > 12 else 0)
        ax.set_yticks(range(grid.height), grid["task_id"].to_list(), fontsize=6)
        fig.colorbar(image, ax=ax, label="success rate")
        shown = f" (the {len(moved)} that moved most)" if frame["task_id"].n_unique() > top else ""
        ax.set_title(f"{report.label}: task success{shown}", fontsize=9)
        ax.set_xlabel("training steps" if report.by_steps else "round")
    fig.tight_layout()
    return fig


def drawable(name: str, reports: list[DriftReport]) -> bool:
    """Whether figure ``name`` has something to draw for any of ``reports``: a report shows no empty chart, and
    no chart of one point (one step, one round) or of one value (every point the same)."""
    def points(table: str, x: str, keep=None, values: tuple[str, ...] = ()) -> bool:
        """Some report's ``table`` has two ``x`` or more (and, with ``values``, two different values)."""
        for report in reports:
            frame = report.tables.get(table)
            if frame is None:
                continue
            frame = frame if keep is None else frame.filter(keep)
            if frame[x].n_unique() < 2:
                continue
            if not values or any(varies(frame[v]) for v in values):
                return True
        return False

    def varies(column: pl.Series) -> bool:
        column = column.drop_nulls()
        return column.len() > 1 and float(column.max()) - float(column.min()) > 1e-9   # not float noise

    by_steps = any(r.by_steps for r in reports)
    evaluated = pl.col("eval_success").is_not_null()
    checks = {
        "heldout": lambda: points("eval_steps", "step", evaluated),
        "eval": lambda: points("eval_steps", "step", evaluated),
        "signals": lambda: not by_steps and points("signals", "round"),
        "growth": lambda: points("synthesis", "round", pl.col("tasks").is_not_null(), ("tasks", "synthesized")),
        "acceptance": lambda: points("candidates", "round") or points("candidates", "signal"),
        "eval_similarity": lambda: points("eval_similarity", "round") or points("eval_similarity", "bin_low"),
        "distribution": lambda: points("weights", "round"),
        "patterns": lambda: points("patterns", "round", pl.col("size") > 0),
        "success": lambda: points("steps", "step"),
        "diversity": lambda: points("diversity", "round", pl.col("sr_at_k").is_not_null(), ("sr_at_k", "ed_rel")),
        "signals_steps": lambda: points("eval_steps", "step", pl.col("rollouts") > 0),
        "task_drift": lambda: points("task_drift", "round"),
        "group_health": lambda: points("group_health", "step"),
    }
    return checks[name]()


def figure_sets(reports: list[DriftReport]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The figures a report leads with and the others it shows: a run's, KEY_FIGURES then the rest of FIGURES; a
    store of ingested rollouts', STEP_FIGURES then those of FIGURES that have something to draw."""
    if not any(r.by_steps for r in reports):
        return KEY_FIGURES, tuple(n for n in FIGURES if n not in KEY_FIGURES)
    key = tuple(n for n in STEP_FIGURES if drawable(n, reports))
    return key, tuple(n for n in FIGURES if n not in key and drawable(n, reports))


_DRAW = {"heldout": heldout, "growth": growth, "acceptance": acceptance, "distribution": distribution, "signals": signals, "patterns": patterns, "success": success,
         "diversity": diversity, "eval": eval_success, "eval_similarity": eval_similarity,
         "group_health": group_health, "signals_steps": signals_steps, "task_drift": task_drift}


def figure_png(name: str, reports: list[DriftReport]) -> bytes:
    """Figure ``name`` (one of FIGURES) as PNG bytes."""
    plt = _pyplot()
    fig = _DRAW[name](reports)
    try:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=90)
        return buffer.getvalue()
    finally:
        plt.close(fig)


def write_figures(reports: list[DriftReport], folder: Path, *, force: bool = False) -> list[Path]:
    """Every figure as ``folder/<name>.png`` (over step windows, those of ``figure_sets``); returns the paths. Each
    is written as every output is (``coevolve_engine.core.outputs``): never over a DuckDB file, nor, without ``force``,
    over a file of another kind."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [n for part in figure_sets(reports) for n in part]
    paths = [folder / f"{name}.png" for name in names]
    for path in paths:
        check_output(path, "png", force=force)
    for name, path in zip(names, paths):
        write_output(path, figure_png(name, reports), "png", force=force)
    return paths
