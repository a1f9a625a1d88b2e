"""Worlds for unguided exploration: BFCL multi-turn seed specs built from the API classes, not from tasks.

D_0 comes from an explorer acting in the environment with no guidance, and BFCL's own tasks are held out for
evaluation, so the worlds an explorer starts from must not be any shipped task's. A world here is a
multi-turn seed spec (no turns, no ground truth yet) whose

- ``involved_classes`` is one of the class combinations BFCL's multi-turn tasks use (``CLASS_SETS``: the
  distinct ``involved_classes`` of ``multi_turn_base`` in bfcl-eval 2026.3.23, written out here so that no
  task file is read), visited in a seeded order;
- ``initial_config`` is generated per class by a seeded generator from small vocabularies (a file tree,
  a Twitter account with a few tweets, a messaging workspace, a ticket queue, a trading account, a credit
  card, a car's state), in the keys each class's ``_load_scenario`` reads; MathAPI is stateless and gets none.

World ``i`` of seed ``s`` depends on ``(s, i)`` only, so asking for more worlds extends the list without
changing the ones before.
"""

from __future__ import annotations

import random
import string
from typing import Any, Callable

#: The class combinations of BFCL's multi-turn tasks (multi_turn_base, bfcl-eval 2026.3.23).
CLASS_SETS: tuple[tuple[str, ...], ...] = (
    ("TradingBot",),
    ("VehicleControlAPI",),
    ("TicketAPI", "TravelAPI"),
    ("TwitterAPI", "VehicleControlAPI"),
    ("GorillaFileSystem",),
    ("MessageAPI", "TradingBot"),
    ("TravelAPI",),
    ("TwitterAPI", "GorillaFileSystem"),
    ("GorillaFileSystem", "MathAPI"),
    ("TwitterAPI", "TravelAPI"),
    ("MessageAPI", "TravelAPI"),
    ("MessageAPI", "VehicleControlAPI"),
    ("TradingBot", "TicketAPI"),
    ("MessageAPI", "GorillaFileSystem"),
    ("VehicleControlAPI", "MathAPI"),
    ("TicketAPI", "GorillaFileSystem"),
    ("TradingBot", "MathAPI"),
    ("TwitterAPI", "TradingBot"),
    ("TicketAPI", "VehicleControlAPI"),
    ("MathAPI", "TravelAPI"),
)

_PEOPLE = ("Maya", "Jonas", "Priya", "Tomas", "Elena", "Kofi", "Hana", "Marco", "Lucia", "Omar", "Ines", "Ravi",
           "Sofia", "Felix", "Amara", "Noah", "Yuki", "Lena")
_HANDLES = ("river", "pixel", "maple", "orbit", "cedar", "nova", "harbor", "quartz", "ember", "willow")
_FOLDERS = ("notes", "reports", "photos", "drafts", "invoices", "src", "archive", "music", "recipes", "travel",
            "research", "budget", "letters", "backup", "data")
_FILE_STEMS = ("summary", "todo", "plan", "results", "meeting", "ideas", "log", "readme", "budget", "itinerary",
               "draft", "contacts", "inventory", "schedule", "review")
_EXTENSIONS = (".txt", ".md", ".csv", ".log")
_SENTENCES = (
    "Quarterly numbers look stable, with a small rise in March.",
    "Remember to renew the library card before Friday.",
    "The prototype passed three of the four load tests.",
    "Buy oat milk, lemons, rice and two notebooks.",
    "Draft the welcome email for the new volunteers.",
    "Server logs show a spike of errors at 02:14.",
    "Flight lands at 18:40; taxi booked for 19:15.",
    "Ideas: a reading club, a garden swap, a repair cafe.",
    "Total spent on supplies this month: 412 dollars.",
    "Call the plumber about the leaking kitchen tap.",
    "Chapter two needs a stronger opening paragraph.",
    "Backup completed without warnings on Sunday night.",
)
_TOPICS = ("#weekend", "#coding", "#coffee", "#travel", "#books", "#running", "#music", "#startup", "#garden")
_TICKET_TITLES = ("Laptop will not boot", "VPN drops every hour", "Printer queue stuck", "Password reset request",
                  "Email sync delayed", "Monitor flickers", "Access to shared drive", "Software licence expired")
_STOCKS = ("AAPL", "GOOG", "TSLA", "MSFT", "NVDA", "ALPH", "OMEG", "QUAS", "NEPT", "SYNX", "ZETA")


def _file_tree(rng: random.Random) -> dict[str, Any]:
    def files(count: int) -> dict[str, Any]:
        names = rng.sample(_FILE_STEMS, count)
        return {f"{name}{rng.choice(_EXTENSIONS)}": {"type": "file", "content": " ".join(rng.sample(_SENTENCES, 2))}
                for name in names}

    contents: dict[str, Any] = {}
    for folder in rng.sample(_FOLDERS, rng.randint(1, 3)):
        inner = files(rng.randint(0, 3))
        if rng.random() < 0.4:
            inner[rng.choice(_FOLDERS)] = {"type": "directory", "contents": files(rng.randint(0, 2))}
        contents[folder] = {"type": "directory", "contents": inner}
    contents.update(files(rng.randint(1, 2)))
    owner = rng.choice(_PEOPLE).lower()
    return {"root": {owner: {"type": "directory", "contents": contents}}}


def _password(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(10))


def _twitter(rng: random.Random) -> dict[str, Any]:
    username = f"{rng.choice(_HANDLES)}_{rng.choice(_PEOPLE).lower()}{rng.randint(1, 99)}"
    tweets = {
        str(index): {"id": index, "username": username, "content": rng.choice(_SENTENCES),
                     "tags": rng.sample(_TOPICS, rng.randint(1, 2)), "mentions": []}
        for index in range(rng.randint(0, 3))
    }
    return {"username": username, "password": _password(rng), "authenticated": False, "tweets": tweets,
            "comments": {}, "retweets": {}, "tweet_counter": len(tweets),
            "following_list": [name.lower() for name in rng.sample(_PEOPLE, rng.randint(1, 3))]}


def _messages(rng: random.Random) -> dict[str, Any]:
    people = rng.sample(_PEOPLE, rng.randint(3, 5))
    user_map = {name: f"USR{index + 1:03d}" for index, name in enumerate(people)}
    inbox = [{rng.choice(list(user_map.values())[1:]): rng.choice(_SENTENCES)} for _ in range(rng.randint(1, 3))]
    return {"random_seed": rng.randint(1, 10**6), "user_count": len(user_map), "user_map": user_map,
            "inbox": inbox, "message_count": len(inbox), "current_user": None}


def _tickets(rng: random.Random) -> dict[str, Any]:
    first = rng.randint(100, 9000)
    owner = rng.choice(_PEOPLE).lower()
    queue = [{"id": first + index, "title": title, "description": rng.choice(_SENTENCES),
              "status": rng.choice(("Open", "Open", "In Progress")), "priority": rng.randint(1, 5),
              "created_by": owner}
             for index, title in enumerate(rng.sample(_TICKET_TITLES, rng.randint(0, 3)))]
    return {"ticket_queue": queue, "ticket_counter": first + len(queue), "current_user": None}


def _trading(rng: random.Random) -> dict[str, Any]:
    return {"account_info": {"account_id": rng.randint(10000, 99999), "balance": float(rng.randint(2000, 60000)),
                             "binding_card": rng.randint(10**15, 10**16 - 1)},
            "authenticated": False, "market_status": rng.choice(("Open", "Closed")),
            "watch_list": rng.sample(_STOCKS, rng.randint(1, 3)), "random_seed": rng.randint(1, 10**6)}


def _travel(rng: random.Random) -> dict[str, Any]:
    first, last = rng.choice(_PEOPLE), rng.choice(("Berg", "Okafor", "Silva", "Tanaka", "Novak", "Haddad"))
    card = str(rng.randint(10**11, 10**12 - 1))
    return {"random_seed": rng.randint(1, 10**6),
            "credit_card_list": {card: {"card_number": str(rng.randint(10**15, 10**16 - 1)),
                                        "expiration_date": f"{rng.randint(1, 12):02d}/{rng.randint(2027, 2031)}",
                                        "cardholder_name": f"{first} {last}",
                                        "card_verification_number": rng.randint(100, 999),
                                        "balance": float(rng.randint(500, 20000))}},
            "booking_record": {}, "user_first_name": first, "user_last_name": last,
            "budget_limit": float(rng.choice((1500, 3000, 5000)))}


def _vehicle(rng: random.Random) -> dict[str, Any]:
    doors = {door: rng.choice(("locked", "unlocked")) for door in ("driver", "passenger", "rear_left", "rear_right")}
    return {"random_seed": rng.randint(1, 10**6), "fuelLevel": float(rng.randint(3, 45)),
            "batteryVoltage": rng.choice((12.2, 12.4, 12.6, 12.8)), "engineState": "stopped", "doorStatus": doors,
            "remainingUnlockedDoors": sum(state == "unlocked" for state in doors.values()),
            "acTemperature": float(rng.randint(18, 28)), "fanSpeed": rng.choice((20, 40, 60)),
            "frontLeftTirePressure": float(rng.randint(28, 36)), "frontRightTirePressure": float(rng.randint(28, 36)),
            "rearLeftTirePressure": float(rng.randint(28, 36)), "rearRightTirePressure": float(rng.randint(28, 36))}


GENERATORS: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "GorillaFileSystem": _file_tree,
    "TwitterAPI": _twitter,
    "MessageAPI": _messages,
    "TicketAPI": _tickets,
    "TradingBot": _trading,
    "TravelAPI": _travel,
    "VehicleControlAPI": _vehicle,
}


def exploration_worlds(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` multi-turn seed specs (see the module doc); world ``i`` depends on ``(seed, i)`` only."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    order = list(CLASS_SETS)
    random.Random(f"bfcl-worlds/{seed}").shuffle(order)
    worlds = []
    for index in range(n):
        rng = random.Random(f"bfcl-world/{seed}/{index}")
        classes = list(order[index % len(order)])
        config = {name: GENERATORS[name](rng) for name in classes if name in GENERATORS}
        worlds.append({
            "kind": "multi_turn", "category": "multi_turn_base", "bfcl_id": f"world-{seed}-{index}",
            "turns": [], "involved_classes": classes, "initial_config": config, "long_context": False,
            "missed_function": {}, "excluded_function": [], "path": [], "ground_truth": [],
        })
    return worlds
