"""Drift metrics per round, from the store alone: every one is a view in ``sql/views/drift_*.sql`` or a query
in this module (``METRIC_QUERIES``), so ``coevolve-engine query`` recomputes any figure.

The one query that is not a view is the weight distribution's Jensen-Shannon divergence: it is the
curriculum's own ``CHANGES_SQL`` (``coevolve_engine.curriculum.weights``), with its ``new_weights`` read from
``task_weights`` for round ``$round``, so the divergence here is the one in ``weight_sets.reason``.
Diversity (SR@k, ED_rel) needs the task prompts' embeddings: the missing ones are computed with
all-MiniLM-L6-v2 and, on a read-only store, kept in a temporary ``embeddings`` table that shadows the stored
one for this connection only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from coevolve_engine.curriculum.weights import CHANGES_SQL
from coevolve_engine.embeddings import DEFAULT_MODEL, Embedder, text_hash
from coevolve_engine.errors import CoevolveError
from coevolve_engine.signals import SignalParams
from coevolve_engine.store import Store

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
}
_PARAMETERS = {"signals": ("threshold", "w", "theta", "min_n", "forgetting_form"), "difficulty": ("threshold",),
               "steps": ("threshold",), "group_health": ("threshold",), "diversity": ("k", "embedding_model"),
               "eval_steps": ("threshold", "w", "theta", "min_n", "forgetting_form")}


@dataclass(frozen=True)
class DriftParams:
    """How the drift metrics are computed."""

    threshold: float = 0.5  # a rollout succeeds when reward >= threshold
    w: int = 3  # forgetting window
    theta: float = 5.0  # rare: share of a pattern below theta percent
    min_n: int = 50  # rare: only once at least min_n trajectories have a pattern
    k: int = 5  # SR@k: neighbours of each task's prompt
    diversity: bool = True  # compute SR@k and ED_rel (embeds prompts that have no cached vector)
    embedding_model: str = DEFAULT_MODEL  # the model name vectors are cached under
    forgetting_form: str = "group"  # forgetting's form: group or trajectory (SignalParams.forgetting)

    def __post_init__(self) -> None:
        self.signal_params()  # checks the signal constants
        if self.k < 1:
            raise ValueError(f"k (SR@k neighbours) must be at least 1, got {self.k}")

    def signal_params(self) -> SignalParams:
        return SignalParams(threshold=self.threshold, w=self.w, theta=self.theta, min_n=self.min_n,
                            forgetting_form=self.forgetting_form)

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


def ensure_prompt_embeddings(store: Store, params: DriftParams, embedder: Embedder | None = None) -> int:
    """Embed the prompts of the task sets that have no cached vector; returns how many were computed.

    A writable store caches them in ``embeddings``; a read-only one gets a temporary ``embeddings`` table
    (the stored rows for these prompts plus the new ones) that shadows the stored table for this connection.
    """
    prompts = [r[0] for r in store.execute(
        "SELECT DISTINCT t.prompt FROM drift_task_sets JOIN tasks AS t USING (task_id) "
        "WHERE t.prompt IS NOT NULL AND sha256(t.prompt) NOT IN "
        "(SELECT text_hash FROM embeddings WHERE model = $model) ORDER BY 1",
        {"model": params.embedding_model}).fetchall()]
    if not prompts:
        return 0
    embedder = embedder or Embedder(store=store, model_name=params.embedding_model)
    vectors = embedder.embed(prompts)
    if store.read_only:
        con = store.con
        con.execute("CREATE OR REPLACE TEMP TABLE embeddings AS SELECT * FROM main.embeddings "
                    "WHERE model = $model AND text_hash IN (SELECT sha256(prompt) FROM tasks)",
                    {"model": params.embedding_model})
        con.executemany("INSERT INTO temp.embeddings (text_hash, model, dim, vector, created_at) "
                        "VALUES (?, ?, ?, ?, current_timestamp)",
                        [(text_hash(p), params.embedding_model, int(v.shape[0]), v.tolist())
                         for p, v in zip(prompts, vectors)])
    return len(prompts)


def metric_table(store: Store, name: str, params: DriftParams) -> pl.DataFrame:
    return store.sql(METRIC_QUERIES[name], params.bind(name))


def compute_drift(store: Store, params: DriftParams | None = None, *, label: str = "run",
                  embedder: Embedder | None = None) -> DriftReport:
    """Every drift metric of ``store``, per round."""
    params = params or DriftParams()
    notes: list[str] = []
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
                             + (" (kept for this analysis only: the store is read-only)" if store.read_only else ""))
    tables = {name: metric_table(store, name, params) for name in names}
    tables["weights"] = weight_divergence(store)
    return DriftReport(label, params, tables, _summary(tables), notes)


def _summary(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per round: the headline of every metric."""
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
