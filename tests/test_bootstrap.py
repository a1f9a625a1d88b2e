"""Bootstrapping D_0 by unguided exploration, through a scripted OpenAI-compatible server on 127.0.0.1.

The explorer acts in worlds built from BFCL's API classes (never an eval task's initial state), the scripted
abstraction writes one draft per world from the calls that were executed, and validation decides: good drafts
become train tasks with no pattern, a draft calling an unknown function is rejected with its reason, a rerun
adds nothing, and the `bootstrap` command does the same from the command line.
"""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from scripted_server import text, tool_calls

if importlib.util.find_spec("litellm") is None:
    pytest.skip("litellm is not installed", allow_module_level=True)
pytest.importorskip("bfcl_eval")
pytest.importorskip("sentence_transformers")

from coevolve_engine.adapters.calls import parse_python_calls  # noqa: E402
from coevolve_engine.adapters.environments import load_environment  # noqa: E402
from coevolve_engine.adapters.environments.bfcl.shipped import MULTI_TURN_CATEGORIES  # noqa: E402
from coevolve_engine.adapters.environments.bfcl.worlds import CLASS_SETS  # noqa: E402
from coevolve_engine.core.endpoint import CallSettings  # noqa: E402
from coevolve_engine.core.errors import CoevolveError  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402
from coevolve_engine.synthesis.bootstrap import UnguidedSynthesizer, bootstrap, world_name  # noqa: E402
from coevolve_engine.synthesis.candidates import SYNTHESIZERS, synthesize  # noqa: E402
from coevolve_engine.synthesis.validation import ValidationOptions  # noqa: E402

SEED = 0
BAD_WORLD = 1  # its draft calls a function no class has: rejected by the schema check
COPY_WORLD = 2  # its draft copies an eval task's request, when the Explorer is given one: rejected


def recipe(classes: list[str], config: dict) -> tuple[str, list[str]]:
    """A user request and the calls that do it, for the first class of a world we have a recipe for."""
    for name in classes:
        if name == "MathAPI":
            return ("Add 17 and 25, multiply 6 by 7, then give me the square root of 1764 to 2 decimals.",
                    ["add(a=17, b=25)", "multiply(a=6, b=7)", "square_root(number=1764, precision=2)"])
        if name == "TradingBot":
            symbol = next(s for s in ("ZETA", "SYNX", "NEPT") if s not in config[name]["watch_list"])
            return (f"Look up {symbol}, put it on my watchlist and then show me the whole watchlist.",
                    [f"get_stock_info(symbol='{symbol}')", f"add_to_watchlist(stock='{symbol}')", "get_watchlist()"])
        if name == "MessageAPI":
            users = list(config[name]["user_map"].values())
            return (f"Log me in as {users[0]}, message {users[1]} that the quarterly review moved to Thursday, "
                    "and list what I have sent.",
                    [f"message_login(user_id='{users[0]}')",
                     f"send_message(receiver_id='{users[1]}', message='The quarterly review moved to Thursday.')",
                     "view_messages_sent()"])
        if name == "TicketAPI":
            return ("Sign in to the help desk as dana with password pw-2291, open a priority 4 ticket titled "
                    "'Projector in room B is dead', then list my tickets.",
                    ["ticket_login(username='dana', password='pw-2291')",
                     "create_ticket(title='Projector in room B is dead', description='No image on screen.', "
                     "priority=4)",
                     "get_user_tickets()"])
        if name == "TwitterAPI":
            account = config[name]
            return (f"Sign in as {account['username']} (password {account['password']}), post 'Trying the new "
                    "bike lane today' and follow zoe_runs.",
                    [f"authenticate_twitter(username='{account['username']}', password='{account['password']}')",
                     "post_tweet(content='Trying the new bike lane today')",
                     "follow_user(username_to_follow='zoe_runs')"])
        if name == "VehicleControlAPI":
            return ("Check the tire pressure, switch the headlights on and tell me the fuel level.",
                    ["check_tire_pressure()", "setHeadlights(mode='on')", "displayCarStatus(option='fuel')"])
        if name == "GorillaFileSystem":
            return ("Make a folder called scratch, go into it and create an empty file todo.txt there.",
                    ["mkdir(dir_name='scratch')", "cd(folder='scratch')", "touch(file_name='todo.txt')"])
        if name == "TravelAPI":
            return ("List every airport, find the one nearest to Rivermist and convert 100 USD to EUR.",
                    ["list_all_airports()", "get_nearest_airport_by_city(location='Rivermist')",
                     "compute_exchange_rate(base_currency='USD', target_currency='EUR', value=100.0)"])
    raise AssertionError(f"no recipe for {classes}")


class Explorer:
    """Answers the explorer with the recipe of the world it is in, and the abstraction with a draft of it."""

    def __init__(self, worlds, eval_prompt: str | None = None):
        self.worlds = worlds
        self.eval_prompt = eval_prompt
        self.explored: list[int] = []

    def world_of(self, content: str) -> int:
        match = re.search(r"bfcl world \d+/(\d+)", content)
        assert match, content[:300]
        return int(match.group(1))

    def __call__(self, request: dict):
        messages = request["messages"]
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        user = "\n".join(str(m.get("content")) for m in messages if m["role"] == "user")
        index = self.world_of(user)
        world = self.worlds[index]
        prompt, calls = recipe(world["involved_classes"], world["initial_config"])
        if system.startswith("You explore a tool environment"):
            assert "failure" not in user.lower() and "signal" not in user.lower()  # no guidance at all
            if any(m["role"] == "assistant" for m in messages):
                return text("I tried a realistic errand in this world.")
            self.explored.append(index)
            return tool_calls(*[(call.name, call.arguments) for c in calls for call in parse_python_calls(c)])
        if system.startswith("You write training tasks"):
            assert "(none: unguided exploration" in user and "CALL " in user
            if index == BAD_WORLD:
                calls = ["launch_rocket(speed=3)"] + calls[1:]
            if index == COPY_WORLD and self.eval_prompt:
                prompt = "  " + self.eval_prompt.upper()
            return text(json.dumps({"tasks": [{"turns": [prompt], "ground_truth": [calls],
                                               "completion_criterion": "the errand is done"}]}))
        raise AssertionError(f"unexpected request: {system[:80]!r}")


def shipped_entries():
    from coevolve_engine.adapters.environments.bfcl.shipped import load_entries

    return [entry for category in MULTI_TURN_CATEGORIES for entry in load_entries(category)]


def test_worlds_are_built_from_the_api_classes_and_never_equal_a_shipped_tasks_state():
    env = load_environment("bfcl")
    worlds = env.exploration_worlds(120, SEED) + env.exploration_worlds(40, SEED + 1)
    entries = shipped_entries()
    shipped_states = [(sorted(e["involved_classes"]), e.get("initial_config", {})) for e in entries]
    shipped_per_class = {}
    for entry in entries:
        for name, config in entry.get("initial_config", {}).items():
            shipped_per_class.setdefault(name, []).append(config)
    assert {tuple(sorted(s)) for s in CLASS_SETS} == {tuple(sorted(e["involved_classes"])) for e in entries
                                                     if e["id"].startswith("multi_turn_base")}
    for world in worlds:
        assert (sorted(world["involved_classes"]), world["initial_config"]) not in shipped_states
        for name, config in world["initial_config"].items():
            assert config not in shipped_per_class.get(name, []), (world["bfcl_id"], name)
        assert world["turns"] == [] and world["ground_truth"] == []  # a world, not a task
        assert env.check_spec(env.exploration_spec(world, "Explore.")) == []  # every state loads into its classes
    assert len({json.dumps(w["initial_config"], sort_keys=True) for w in worlds}) == len(worlds)
    assert env.exploration_worlds(5, SEED) == worlds[:5]  # asking for more never changes the first ones
    assert env.exploration_worlds(5, SEED + 1) != worlds[:5]


def test_an_environment_without_worlds_says_so_and_calc_has_its_start_values():
    from coevolve_engine.core.environment import Environment

    class Bare(Environment):
        name = "bare"

        def check_spec(self, spec):
            return []

        def start(self, task_id, spec):
            raise NotImplementedError

    with pytest.raises(NotImplementedError, match="'bare' has no worlds for unguided exploration"):
        Bare().exploration_worlds(3, 0)
    calc = load_environment("calc")
    worlds = calc.exploration_worlds(4, 7)
    assert worlds == calc.exploration_worlds(4, 7) and all(-20 <= w["start"] <= 50 for w in worlds)
    assert calc.exploration_spec(worlds[0], "Explore.")["start"] == worlds[0]["start"]


@pytest.fixture(scope="module")
def embedder():
    """One sentence embedder for the module's validations (its model loads once)."""
    from coevolve_engine.models.embeddings import Embedder

    return Embedder()


@pytest.fixture
def eval_store(db_path):
    """A store holding a few official BFCL tasks, held out as split 'eval'."""
    env = load_environment("bfcl")
    held_out = [{**task, "split": "eval"} for task in env.load_tasks(category="multi_turn_base", limit=5)]
    with Store(db_path) as store:
        store.add_records("tasks", held_out, label="bfcl eval tasks")
    return db_path


def client(server) -> dict:
    """The scripted server as the synthesizers' options name it: the model there, no retries."""
    return dict(model=server.endpoint(), calls=CallSettings(timeout=5, retries=0))


def unguided(server, store_path, **options) -> UnguidedSynthesizer:
    """The unguided synthesizer of BFCL worlds, exploring and abstracting with the scripted server's model."""
    return UnguidedSynthesizer(store_path=store_path, env="bfcl", **client(server), **options)


def test_bootstrap_explores_unguided_until_n_tasks_are_accepted_and_a_rerun_adds_nothing(eval_store, embedder,
                                                                                         scripted_server):
    env = load_environment("bfcl")
    with Store(eval_store, read_only=True) as store:
        an_eval_prompt = store.scalar("SELECT prompt FROM tasks WHERE split = 'eval' ORDER BY task_id LIMIT 1")
    explorer = Explorer(env.exploration_worlds(12, SEED), eval_prompt=an_eval_prompt)
    scripted_server.respond_with(explorer)
    lines: list[str] = []
    report = bootstrap(eval_store, synthesizer=unguided(scripted_server, eval_store, max_explore_steps=6), n=3,
                       seed=SEED, progress=lines.append, validation=ValidationOptions(embedder=embedder))
    # worlds 0-2 first (one bad draft, one copying an eval task), then worlds 3-4 for the two still missing
    assert explorer.explored == [0, 1, 2, 3, 4]
    assert (report.explored, report.proposed, report.accepted) == (5, 5, 3)
    assert report.rejected == {"schema": 1, "synthesis": 1}
    assert report.done and report.accepted_total == 3 and report.skipped == 0
    assert any("bfcl world 0/2: 1 candidate(s) (the task's first user message is an eval task's" in line
               for line in lines)

    with Store(eval_store, read_only=True) as store:
        rows = store.execute(
            "SELECT c.verdict, c.reason, c.pattern_id, c.signal, c.round, c.provenance, t.split, t.source, t.spec, "
            "t.prompt FROM candidates c LEFT JOIN tasks t USING (task_id) ORDER BY c.created_at").fetchall()
        assert [(r[0], r[1]) for r in rows] == [("accepted", "accepted"), ("rejected", "schema"),
                                                ("rejected", "synthesis"), ("accepted", "accepted"),
                                                ("accepted", "accepted")]
        checks = dict(store.execute("SELECT reason, checks FROM candidates WHERE verdict = 'rejected'").fetchall())
        assert "launch_rocket" in json.loads(checks["schema"])[-1]["detail"]
        assert "eval tasks are held out" in json.loads(checks["synthesis"])[-1]["detail"]
        eval_rows = store.execute("SELECT prompt, spec FROM tasks WHERE split = 'eval'").fetchall()
        eval_prompts = {prompt for prompt, _ in eval_rows}
        eval_states = [json.loads(spec)["initial_config"] for _, spec in eval_rows]
        for verdict, _, pattern_id, signal, round_, provenance, split, source, spec, prompt in rows:
            provenance = json.loads(provenance)
            assert (pattern_id, signal, round_) == (None, None, 0)
            assert provenance["world_id"] == world_name("bfcl", SEED, provenance["world"])
            assert provenance["explorer_model"] == "openai/scripted" and provenance["exploration_actions"]
            assert provenance["prompt_versions"] == ["explore_unguided@1", "abstract@2"]
            if verdict == "accepted":
                spec = json.loads(spec)
                assert (split, source) == ("train", "synthesized")
                assert prompt not in eval_prompts and spec["initial_config"] not in eval_states
        assert store.scalar("SELECT count(*) FROM tasks WHERE split = 'train'") == 3
        purposes = dict(store.execute("SELECT purpose, count(*) FROM llm_calls GROUP BY purpose").fetchall())
        assert purposes == {"exploration": 10, "abstraction": 5}

    requests = len(scripted_server.requests)
    again = bootstrap(eval_store, synthesizer=unguided(scripted_server, eval_store), n=3, seed=SEED,
                      validation=ValidationOptions(embedder=embedder))
    assert (again.explored, again.proposed, again.accepted, again.accepted_total) == (0, 0, 0, 3)
    assert len(scripted_server.requests) == requests  # nothing asked, nothing added
    more = bootstrap(eval_store, synthesizer=unguided(scripted_server, eval_store), n=4, seed=SEED,
                     validation=ValidationOptions(embedder=embedder))
    assert (more.skipped, more.explored, more.accepted, more.accepted_total) == (5, 1, 1, 4)
    assert explorer.explored == [0, 1, 2, 3, 4, 5]


def test_unguided_synthesis_runs_in_a_round_without_patterns_as_the_random_exploration_ablation(db_path,
                                                                                                scripted_server):
    assert not SYNTHESIZERS.load("llm-unguided").needs_patterns
    env = load_environment("bfcl")
    scripted_server.respond_with(Explorer(env.exploration_worlds(12, 5)))
    with Store(db_path) as store:
        report = synthesize(store, round=2, synthesizer="llm-unguided", max_candidates=2, seed=5, options=dict(
            store_path=db_path, env="bfcl", max_explore_steps=4, **client(scripted_server)))
        assert (report.round, report.patterns, report.proposed, report.added) == (2, 0, 2, 2)
        rows = store.execute("SELECT round, pattern_id, signal, synthesizer FROM candidates").fetchall()
    assert rows == [(2, None, None, "llm-unguided")] * 2
    with Store(db_path) as store, pytest.raises(CoevolveError, match="needs an environment"):
        synthesize(store, round=2, synthesizer="llm-unguided", max_candidates=1, seed=5,
                   options=dict(store_path=db_path, **client(scripted_server)))


def test_the_bootstrap_command_builds_d0_and_reports_it(db_path, scripted_server):
    from click.testing import CliRunner

    from coevolve_engine.cli import cli

    env = load_environment("bfcl")
    scripted_server.respond_with(Explorer(env.exploration_worlds(4, SEED)))
    args = ["bootstrap", "--env", "bfcl", "--explorer-model", "openai/scripted", "--n", "2", "--max-worlds", "3",
            "--api-base", scripted_server.api_base, "--api-key", "dummy", "--retries", "0", "--create", "--db", str(db_path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "explored 3 worlds of bfcl; 3 candidates proposed; 2 accepted, 1 rejected (schema 1)" in result.output
    assert "D_0: 2 of 2 tasks in the store (split 'train')" in result.output
    assert "coevolve-engine query \"select verdict" in result.output
    rerun = CliRunner().invoke(cli, args + ["--n", "3", "--no-progress"])
    assert rerun.exit_code == 0, rerun.output
    assert "explored 0 worlds of bfcl (3 explored by an earlier run, skipped)" in rerun.output
    assert "D_0: only 2 of 3 tasks in the store after 3 worlds" in rerun.output
    unknown = CliRunner().invoke(cli, ["bootstrap", "--env", "nope", "--explorer-model", "m", "--create", "--db", str(db_path)])
    assert unknown.exit_code != 0 and "unknown environment 'nope'" in unknown.output


def test_bootstrap_stops_when_the_model_gives_nothing_and_retries_those_worlds_next_time(db_path, embedder,
                                                                                          scripted_server):
    from scripted_server import http_error

    scripted_server.respond_with(lambda request: http_error(503, "the model is loading"))
    with pytest.raises(CoevolveError, match="3 worlds in a row gave no task.*the model is loading") as caught:
        bootstrap(db_path, synthesizer=unguided(scripted_server, db_path), n=5,
                  validation=ValidationOptions(embedder=embedder))
    assert "run bootstrap again" in str(caught.value)
    env = load_environment("bfcl")
    explorer = Explorer(env.exploration_worlds(6, SEED))
    scripted_server.respond_with(explorer)
    report = bootstrap(db_path, synthesizer=unguided(scripted_server, db_path), n=1,
                       validation=ValidationOptions(embedder=embedder))
    assert explorer.explored == [0] and report.accepted_total == 1
    assert report.rejected == {"synthesis": 3}  # the three failures, kept with their reason
