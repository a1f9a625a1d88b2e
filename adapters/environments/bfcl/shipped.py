"""What the ``bfcl-eval`` package ships, read offline: task files, answers, function docs, API classes.

Every import of ``bfcl_eval`` goes through ``bfcl_module`` so that ``BFCL_PROJECT_ROOT`` is set first:
without it, importing bfcl's config writes ``result/``, ``score/`` and ``.file_locks`` beside
site-packages. We point it at a cache folder unless the user set it already.

We never use bfcl's executor (``execute_multi_turn_func_call``): it keeps instances in module globals keyed
by model name and task id and ``eval``s call strings. ``api_class`` hands out the classes themselves so that
each episode builds fresh instances of its own.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

BFCL_VERSION = "2026.3.23"
INSTALL_HINT = (
    "pip install 'coevolve-engine[bfcl]' && pip install --no-deps bfcl-eval==" + BFCL_VERSION
)

#: Multi-turn categories we load; each holds 200 tasks in bfcl-eval 2026.3.23.
MULTI_TURN_CATEGORIES = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
#: Single-turn categories scored by bfcl's AST checker (Python only).
SINGLE_TURN_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
CATEGORIES = MULTI_TURN_CATEGORIES + SINGLE_TURN_CATEGORIES

#: The API classes of the multi-turn categories. bfcl also maps web-search and memory classes, which need
#: the network or extra models, so tasks may not declare them.
MULTI_TURN_CLASSES = (
    "GorillaFileSystem",
    "MathAPI",
    "MessageAPI",
    "TwitterAPI",
    "TicketAPI",
    "TradingBot",
    "TravelAPI",
    "VehicleControlAPI",
)


def _default_project_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "coevolve-engine" / "bfcl"


def bfcl_module(name: str) -> ModuleType:
    """Import ``bfcl_eval.<name>`` with ``BFCL_PROJECT_ROOT`` pointing at a cache folder."""
    if "BFCL_PROJECT_ROOT" not in os.environ:
        root = _default_project_root()
        root.mkdir(parents=True, exist_ok=True)
        os.environ["BFCL_PROJECT_ROOT"] = str(root)
    try:
        return importlib.import_module(f"bfcl_eval.{name}" if name else "bfcl_eval")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "bfcl_eval":
            raise ModuleNotFoundError(
                f"the BFCL environment needs bfcl-eval; install it with: {INSTALL_HINT}", name=exc.name
            ) from exc
        raise ModuleNotFoundError(
            f"bfcl-eval needs {exc.name!r}, which is not installed; install the extra with: {INSTALL_HINT}",
            name=exc.name,
        ) from exc


@functools.lru_cache(maxsize=1)
def data_dir() -> Path:
    """The ``data/`` folder inside the installed bfcl_eval package."""
    package = bfcl_module("")
    return Path(package.__file__).resolve().parent / "data"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def task_file_name(category: str) -> str:
    return f"BFCL_v4_{category}.json"


def load_entries(category: str) -> list[dict[str, Any]]:
    """The task entries of one category, as shipped (``question``, ``initial_config``, ``function``...)."""
    return _read_jsonl(data_dir() / task_file_name(category))


def load_answers(category: str) -> dict[str, Any]:
    """Entry id -> ground truth of one category."""
    rows = _read_jsonl(data_dir() / "possible_answer" / task_file_name(category))
    return {row["id"]: row["ground_truth"] for row in rows}


@functools.lru_cache(maxsize=None)
def _function_docs(class_name: str) -> tuple[str, ...]:
    mapping = bfcl_module("constants.executable_backend_config").MULTI_TURN_FUNC_DOC_FILE_MAPPING
    rows = _read_jsonl(data_dir() / "multi_turn_func_doc" / mapping[class_name])
    return tuple(json.dumps(row) for row in rows)


def function_docs(class_name: str) -> list[dict[str, Any]]:
    """BFCL function docs (name, description, parameters) of one multi-turn API class, a fresh copy."""
    if class_name not in MULTI_TURN_CLASSES:
        raise KeyError(f"unknown BFCL API class {class_name!r}; known: {', '.join(MULTI_TURN_CLASSES)}")
    return [json.loads(row) for row in _function_docs(class_name)]


def api_class(class_name: str) -> type:
    """The Python class behind a multi-turn API, imported through bfcl's class -> module map."""
    if class_name not in MULTI_TURN_CLASSES:
        raise KeyError(f"unknown BFCL API class {class_name!r}; known: {', '.join(MULTI_TURN_CLASSES)}")
    mapping = bfcl_module("constants.executable_backend_config").CLASS_FILE_PATH_MAPPING
    module = importlib.import_module(mapping[class_name])
    return getattr(module, class_name)


def is_stateless(class_name: str) -> bool:
    """Whether bfcl builds this class without loading a scenario (MathAPI)."""
    return class_name in bfcl_module("constants.executable_backend_config").STATELESS_CLASSES


def added_functions_prompt() -> str:
    """The user message bfcl sends in a miss_func turn, when the held-out functions become available."""
    return bfcl_module("constants.default_prompts").DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
