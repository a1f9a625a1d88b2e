"""Drift metrics per round, or per window of training steps, from the store alone: every one is a view in
``sql/views/drift_*.sql`` or a query in this module (``METRIC_QUERIES``), so ``coevolve-engine query`` recomputes
any figure.

The one query that is not a view is the weight distribution's Jensen-Shannon divergence: it is the
curriculum's own ``CHANGES_SQL`` (``coevolve_engine.curriculum.weights``), with its ``new_weights`` read from
``task_weights`` for round ``$round``, so the divergence here is the one in ``weight_sets.reason``.
Diversity (SR@k, ED_rel) needs the task prompts' embeddings: the missing ones are computed with
all-MiniLM-L6-v2 and, on a read-only store, kept in a temporary ``embeddings`` table that shadows the stored
one for this connection only, and in the cache folder (``coevolve_engine.models.embeddings.VectorCache``) so the next
analysis embeds nothing.

A store of ingested rollouts (no ``run``: no rounds row and at most one round) is analysed over windows of
training steps instead (``DriftParams.window``, chosen from the data when not set): the connection's variable
``drift_window`` turns ``drift_rounds``, the spine of the drift views, into those windows, and every table's
``round`` column then numbers windows (``DriftReport.window`` says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import polars as pl

from coevolve_engine.curriculum.weights import CHANGES_SQL
from coevolve_engine.models.embeddings import DEFAULT_MODEL, Embedder, VectorCache, text_hash
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.signal_params import SignalParams, signal_setting
from coevolve_engine.core.store import Store

_NEW_WEIGHTS = "FROM new_weights)"
if CHANGES_SQL.count(_NEW_WEIGHTS) != 1:  # pragma: no cover - guards the reuse below against edits there
    raise RuntimeError("curriculum.weights.CHANGES_SQL changed shape; update drift.metrics.JS_SQL")

# The Jensen-Shannon divergence (bits) between round $round's weights and round $prev's.
JS_SQL = ("SELECT js_divergence FROM (\n"
          + CHANGES_SQL.replace(_NEW_WEIGHTS, "FROM task_weights WHERE round = $round)") + ")")

# Each table of a DriftReport and the query that recomputes it ($threshold, $w, $theta, $min_n, $forgetting,
# $k bound).
METRIC_QUERIES: dict[str, str] = {
    "rounds": "SELECT * FROM drift_rounds ORDER BY round",
    "task_sets": "SELECT * FROM drift_task_sets ORDER BY round, task_id",
    "synthesis": "SELECT * FROM drift_synthesis ORDER BY round",
    "synthesis_sources": "SELECT * FROM drift_synthesis_sources ORDER BY round, signal, pattern_id",
    "candidates": "SELECT * FROM drift_candidates ORDER BY round, signal",
    "signals": "SELECT * FROM drift_signals_with(threshold := $threshold, w := $w, theta := $theta, "
               "min_n := $min_n, forgetting_form := $forgetting_form) ORDER BY round",
    "patterns": "SELECT * FROM drift_patterns ORDER BY round, share DESC, lineage",
    "difficulty": "SELECT * FROM drift_difficulty_with(threshold := $threshold) ORDER BY round",
    "steps": "SELECT * FROM drift_steps_with(threshold := $threshold) ORDER BY step",
    "ends": "SELECT * FROM drift_ends_with(threshold := $threshold) ORDER BY round",
    "group_health": "SELECT * FROM group_health_with(threshold := $threshold) ORDER BY step",
    "tools": "SELECT * FROM drift_tools ORDER BY round, calls DESC, tool",
    "env_classes": "SELECT * FROM drift_env_classes ORDER BY round, rollouts DESC, env_class",
    "turns": "SELECT * FROM drift_turns ORDER BY round, turn",
    "diversity": "SELECT * FROM drift_diversity_with(k := $k, embedding_model := $embedding_model) ORDER BY round",
    "eval": "SELECT * FROM drift_eval ORDER BY step NULLS LAST, round NULLS FIRST, created_at, eval_id",
    "eval_rounds": "SELECT * FROM drift_eval_rounds ORDER BY round",
    "eval_steps": "SELECT * FROM drift_eval_steps_with(threshold := $threshold, w := $w, theta := $theta, "
                  "min_n := $min_n, forgetting_form := $forgetting_form) ORDER BY step",
    "eval_similarity": "SELECT * FROM drift_eval_similarity ORDER BY round, bin_low",
    "costs": "SELECT * FROM round_costs ORDER BY round",
    # what the signals found, by task and by pattern, over the whole history
    "forgetting_tasks": "SELECT * FROM forgetting_tasks_with(w := $w, threshold := $threshold) ORDER BY rank",
    "boundary_tasks": "SELECT task_id, count(*) AS mixed_groups, min(step) AS first_step, max(step) AS last_step, "
                      "avg(p) AS mean_group_success FROM boundary_with(threshold := $threshold) "
                      "GROUP BY task_id ORDER BY mixed_groups DESC, task_id",
    "rare_patterns": "SELECT action_pattern, trajectories, share, first_step, last_step, rare_trajectories "
                     "FROM rare_patterns_with(theta := $theta, min_n := $min_n) WHERE rare "
                     "ORDER BY trajectories, action_pattern",
    # each task's success per round (or window): how the tasks drifted
    "task_drift": "SELECT r.round, s.task_id, CAST(sum(s.rollouts) AS BIGINT) AS rollouts, "
                  "sum(s.successes) / sum(s.rollouts) AS success_rate "
                  "FROM drift_rounds AS r JOIN task_steps_with(threshold := $threshold) AS s "
                  "ON s.step BETWEEN r.first_step AND r.last_step GROUP BY ALL ORDER BY r.round, s.task_id",
}
#: the tables keyed by the round as recorded (weight sets, patterns, candidates, run phases), not by drift_rounds:
#: over step windows they stay tables of their own and out of the summary
ROUND_ONLY = ("synthesis_sources", "candidates", "patterns", "eval_rounds", "eval_similarity", "costs", "weights")
#: a store of ingested rollouts is cut into at most this many step windows unless DriftParams.window says
MAX_WINDOWS = 12
_PARAMETERS = {"signals": ("threshold", "w", "theta", "min_n", "forgetting_form"), "difficulty": ("threshold",),
               "steps": ("threshold",), "ends": ("threshold",), "group_health": ("threshold",),
               "diversity": ("k", "embedding_model"),
               "eval_steps": ("threshold", "w", "theta", "min_n", "forgetting_form"),
               "forgetting_tasks": ("w", "threshold"), "boundary_tasks": ("threshold",),
               "rare_patterns": ("theta", "min_n"), "task_drift": ("threshold",)}


@dataclass(frozen=True)
class DriftParams:
    """How the drift metrics are computed: the signal constants (``SignalParams``'s fields) and drift's own."""

    threshold: float = signal_setting("threshold")
    w: int = signal_setting("w")
    theta: float = signal_setting("theta")
    min_n: int = signal_setting("min_n")
    k: int = 5  # SR@k: neighbours of each task's prompt
    diversity: bool = True  # compute SR@k and ED_rel (embeds prompts that have no cached vector)
    embedding_model: str = DEFAULT_MODEL  # the model name vectors are cached under
    forgetting_form: str = signal_setting("forgetting_form")
    window: int | None = None  # steps per window to analyse over (0: rounds; None: chosen, see choose_window)

    def __post_init__(self) -> None:
        self.signal_params()  # checks the signal constants
        if self.k < 1:
            raise ValueError(f"k (SR@k neighbours) must be at least 1, got {self.k}")
        if self.window is not None and self.window < 0:
            raise ValueError(f"window (training steps per window, 0 for rounds) must be at least 0, got {self.window}")

    def like(self, report: "DriftReport") -> "DriftParams":
        """These parameters over what ``report`` went by (its step windows, or rounds): to compare another store."""
        return replace(self, window=report.window or 0)

    def signal_params(self) -> SignalParams:
        return SignalParams.of(self)

    def bind(self, metric: str) -> dict:
        values = {"threshold": self.threshold, "w": self.w, "theta": self.theta, "min_n": self.min_n,
                  "k": self.k, "embedding_model": self.embedding_model, "forgetting_form": self.forgetting_form}
        return {name: values[name] for name in _PARAMETERS.get(metric, ())}


@dataclass
class DriftReport:
    """Every drift table of one store; ``summary`` is one row per round joining the headline columns."""

    label: str
    params: DriftParams
    tables: dict[str, pl.DataFrame]
    summary: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    window: int | None = None  # the steps per window when the report is over step windows, not rounds

    @property
    def by_steps(self) -> bool:
        """Whether the ``round`` column numbers windows of training steps (a store of ingested rollouts)."""
        return self.window is not None

    def period(self, round_: int) -> str:
        """How a row's ``round`` reads: "round 2", or "steps 4-5" / "step 4" over step windows."""
        if not self.by_steps:
            return f"round {round_}"
        row = self.tables["rounds"].filter(pl.col("round") == round_).row(0, named=True)
        first, last = row["first_step"], row["last_step"]
        return f"step {first}" if first == last else f"steps {first}-{last}"

    def __getitem__(self, name: str) -> pl.DataFrame:
        return self.tables[name]


def weight_divergence(store: Store) -> pl.DataFrame:
    """round, previous_round, js_previous (bits, from the previous weight set) and js_round0 (from the first)."""
    rounds = [r[0] for r in store.execute("SELECT round FROM weight_sets ORDER BY round").fetchall()]
    rows = []
    for i, round_ in enumerate(rounds):
        previous = rounds[i - 1] if i else None
        js_previous = None if previous is None else _js(store, round_, previous)
        rows.append({"round": round_, "previous_round": previous, "js_previous": js_previous,
                     "js_round0": _js(store, round_, rounds[0])})
    schema = {"round": pl.Int32, "previous_round": pl.Int32, "js_previous": pl.Float64, "js_round0": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def _js(store: Store, round_: int, previous: int) -> float:
    value = store.execute(JS_SQL, {"round": round_, "prev": previous}).fetchall()[0][0]
    return 0.0 if abs(value) < 1e-12 else float(value)


def ensure_prompt_embeddings(store: Store, params: DriftParams, embedder: Embedder | None = None,
                             cache: VectorCache | None = None) -> int:
    """Embed the prompts of the task sets that have no cached vector; returns how many were computed.

    A writable store caches them in ``embeddings``; a read-only one gets a temporary ``embeddings`` table
    (the stored rows for these prompts plus the others) that shadows the stored table for this connection, and
    the vectors it lacks come from, and go to, the cache folder (``VectorCache``), so the next analysis of the
    same store embeds nothing.
    """
    prompts = [r[0] for r in store.execute(
        "SELECT DISTINCT t.prompt FROM drift_task_sets JOIN tasks AS t USING (task_id) "
        "WHERE t.prompt IS NOT NULL AND sha256(t.prompt) NOT IN "
        "(SELECT text_hash FROM embeddings WHERE model = $model) ORDER BY 1",
        {"model": params.embedding_model}).fetchall()]
    if not prompts:
        return 0
    if not store.read_only:
        embedder = embedder or Embedder(store=store, model_name=params.embedding_model)
        embedder.embed(prompts)
        return len(prompts)
    cache = cache or VectorCache(params.embedding_model)
    vectors = cache.load([text_hash(p) for p in prompts])
    missing = [p for p in prompts if text_hash(p) not in vectors]
    if missing:
        embedder = embedder or Embedder(store=store, model_name=params.embedding_model)
        fresh = dict(zip((text_hash(p) for p in missing), embedder.embed(missing)))
        cache.add(fresh)
        vectors.update(fresh)
    con = store.con
    con.execute("CREATE OR REPLACE TEMP TABLE embeddings AS SELECT * FROM main.embeddings "
                "WHERE model = $model AND text_hash IN (SELECT sha256(prompt) FROM tasks)",
                {"model": params.embedding_model})
    con.executemany("INSERT INTO temp.embeddings (text_hash, model, dim, vector, created_at) "
                    "VALUES (?, ?, ?, ?, current_timestamp)",
                    [(h, params.embedding_model, int(v.shape[0]), v.tolist()) for h, v in vectors.items()])
    return len(missing)


def choose_window(store: Store, params: DriftParams) -> int | None:
    """The steps per window to analyse ``store`` over, None for rounds: ``params.window`` when set (0: rounds);
    else rounds when the store has a ``run``'s rounds or more than one round; else, for a store of ingested
    rollouts, the smallest window that cuts its steps into at most MAX_WINDOWS windows (``drift_rounds`` cuts
    the steps that exist, run by run between gaps, so there may be more when it has more runs than that)."""
    if params.window is not None:
        return params.window or None
    store.execute("RESET VARIABLE drift_window")
    if store.scalar("SELECT count(*) FROM rounds") or store.scalar("SELECT count(*) FROM drift_rounds") > 1:
        return None
    steps = store.scalar("SELECT count(DISTINCT step) FROM trajectories")
    if not steps:
        return None
    low, high = 1, steps  # windows(size) only falls as size grows; find the smallest size with few enough
    try:
        while low < high:
            size = (low + high) // 2
            store.execute("SET VARIABLE drift_window = $size", {"size": size})
            if store.scalar("SELECT count(*) FROM drift_rounds") <= MAX_WINDOWS:
                high = size
            else:
                low = size + 1
    finally:
        store.execute("RESET VARIABLE drift_window")
    return low


def metric_table(store: Store, name: str, params: DriftParams) -> pl.DataFrame:
    return store.sql(METRIC_QUERIES[name], params.bind(name))


def compute_drift(store: Store, params: DriftParams | None = None, *, label: str = "run",
                  embedder: Embedder | None = None) -> DriftReport:
    """Every drift metric of ``store``, per round, or per window of training steps (``choose_window``)."""
    params = params or DriftParams()
    window = choose_window(store, params)
    if window is None:
        return _compute(store, params, label, embedder, None)
    store.execute("SET VARIABLE drift_window = $size", {"size": int(window)})
    try:
        return _compute(store, params, label, embedder, window)
    finally:
        store.execute("RESET VARIABLE drift_window")


def _compute(store: Store, params: DriftParams, label: str, embedder: Embedder | None,
             window: int | None) -> DriftReport:
    notes: list[str] = []
    if window is not None:
        notes.append(f"no rounds of `run` in this store: every table is over windows of {window} training step"
                     f"{'' if window == 1 else 's'} (the round column numbers them; set with --step-window)")
    names = [n for n in METRIC_QUERIES if n != "diversity" or params.diversity]
    if params.diversity:
        try:
            computed = ensure_prompt_embeddings(store, params, embedder)
        except CoevolveError as exc:
            notes.append(f"diversity left out: {exc}")
            names.remove("diversity")
        else:
            if computed:
                notes.append(f"embedded {computed} task prompts with {params.embedding_model}"
                             + (" (the store is read-only: kept in the cache folder for the next analysis)"
                                if store.read_only else ""))
    tables = {name: metric_table(store, name, params) for name in names}
    tables["weights"] = weight_divergence(store)
    return DriftReport(label, params, tables, _summary(tables, by_steps=window is not None), notes, window)


def _summary(tables: dict[str, pl.DataFrame], *, by_steps: bool = False) -> pl.DataFrame:
    """One row per round (or step window): the headline of every metric."""
    rounds = tables["rounds"].select("round", "status", "first_step", "last_step")
    patterns = (tables["patterns"].filter(pl.col("size") > 0).group_by("round")
                .agg(pl.col("patterns").sum().alias("patterns"),
                     pl.col("share").max().alias("top_pattern_share")))
    parts = [
        tables["synthesis"].select("round", "tasks", "new_tasks", "synthesized", "synthesized_share"),
        tables["weights"].select("round", "js_previous", "js_round0"),
        tables["signals"].select("round", "trajectories", "flagged", "forgetting", "boundary", "rare"),
        tables["eval_rounds"].select("round", "eval_success", "eval_tasks", "eval_step"),  # held-out success
        patterns,
        tables["difficulty"].select("round", "success_rate", pl.col("median").alias("median_task_success")),
        tables["costs"].select("round", "training_seconds", "feedback_seconds", "feedback_share"),  # loop cost
        _dead_groups(tables["group_health"]),
    ]
    if "diversity" in tables:
        parts.append(tables["diversity"].select("round", "sr_at_k", "ed_rel"))
    if by_steps:  # the round-keyed tables (weights, patterns, phases) do not line up with step windows
        parts = [part for part in parts if not set(part.columns) & {"js_previous", "eval_success", "patterns",
                                                                       "training_seconds"}]
    summary = rounds
    for part in parts:
        summary = summary.join(part.with_columns(pl.col("round").cast(pl.Int32)), on="round", how="left")
    return summary.sort("round")


def _dead_groups(health: pl.DataFrame) -> pl.DataFrame:
    """Per round, the share of its GRPO groups that were dead (no reward variance, no gradient)."""
    return (health.filter(pl.col("round").is_not_null()).group_by("round")
            .agg((pl.col("dead_groups").sum() / pl.col("groups").sum()).alias("dead_group_share")))


def compare(first: DriftReport, second: DriftReport) -> pl.DataFrame:
    """The two runs' summaries side by side, one row per round: each column as ``name[label]``."""
    a_label, b_label = first.label, second.label
    if a_label == b_label:
        a_label, b_label = f"{a_label}:a", f"{b_label}:b"
    a = first.summary.rename({c: f"{c}[{a_label}]" for c in first.summary.columns if c != "round"})
    b = second.summary.rename({c: f"{c}[{b_label}]" for c in second.summary.columns if c != "round"})
    joined = a.join(b, on="round", how="full", coalesce=True).sort("round")
    interleaved = ["round"] + [name for c in first.summary.columns if c != "round"
                               for name in (f"{c}[{a_label}]", f"{c}[{b_label}]") if name in joined.columns]
    return joined.select(interleaved + [c for c in joined.columns if c not in interleaved])
