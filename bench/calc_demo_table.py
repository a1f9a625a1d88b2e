"""Print a summary.json of bench/calc_demo_run.py as a table: python bench/calc_demo_table.py WORKDIR..."""
import json
import sys
from pathlib import Path

for workdir in sys.argv[1:]:
    summary = json.loads((Path(workdir) / "summary.json").read_text())
    print(f"{workdir}: loop {summary['loop_seconds']} s, overrides {summary['overrides']}")
    print(f"  {'checkpoint':<10} {'loop_s':>7} {'rollouts':>8} {'added':>5} {'held-out':>8} {'test':>6} {'seed':>6}  by skill")
    for r in summary["rows"]:
        skills = " ".join(f"{k.split('=')[0][:4]}{k.split('=')[1][:2]}:{v.split('/')[0]}" for k, v in r["by_skill"].items())
        print(f"  {r['checkpoint']:<10} {r.get('loop_s', ''):>7} {r.get('train_rollout_success') or '':>8} "
              f"{r.get('tasks_added', ''):>5} {r['held_out']:>8.1%} {r['test_all']:>6.1%} {r['seed']:>6.1%}  {skills}")
