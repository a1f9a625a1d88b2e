"""The HTML report: the result first (a headline and the key figures, then the failure patterns in words, then
the details folded), self-contained (figures as data URIs, no external resource, a CSP that forbids network
loads); and, where a Chromium is installed, rendered headless: every figure decodes, the page makes no network
request, and the headline and the first figure are on the first screen (1280 x 800)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli
from coevolve_engine.core.errors import CoevolveError
from test_drift import build_run_a

pytest.importorskip("matplotlib")

DATA_IMAGE = re.compile(r'<img id="figure-(\w+)" alt="\w+" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')


@pytest.fixture(scope="module")
def report_path(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    db = build_run_a(folder / "coevolve.duckdb")
    out = folder / "report.html"
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "-o", str(out), "--neighbours", "1"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


def test_report_is_self_contained(report_path):
    page = report_path.read_text(encoding="utf-8")
    assert "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:;" in page
    assert "<script" not in page and "<link" not in page and "@import" not in page and "url(" not in page
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing to fetch
    figures = dict(DATA_IMAGE.findall(page))
    assert list(figures) == ["heldout", "signals", "growth", "acceptance", "group_health", "distribution", "eval",
                             "patterns", "success", "diversity", "eval_similarity"]   # the key figures first
    assert all(base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n" for data in figures.values())


def test_report_contents(report_path):
    page = report_path.read_text(encoding="utf-8")
    assert "steps_per_round" in page                                    # the run's configuration
    assert "<th>js_previous</th>" in page and "0.1556" in page           # per-round tables
    assert "0-0: boundary, 2 rollouts" in page and "cd before ls" in page  # top patterns and summaries
    assert "representative a@1#0" in page and "forgot how to add" in page
    accepted = page[page.index('id="candidates-accepted"'):page.index('id="candidates-rejected"')]
    rejected = page[page.index('id="candidates-rejected"'):]
    assert "c0" in accepted and "c1" not in accepted
    assert "<td>c1</td>" in rejected and "ground_truth" in rejected and "<td>c2</td>" in rejected and "novelty" in rejected
    assert "<th>eval_similarity</th>" in accepted and '<td class="num">0.93</td>' in accepted


def test_report_shows_eval_success_next_to_the_signals(report_path):
    page = report_path.read_text(encoding="utf-8")
    rounds = page[page.index('id="rounds"'):page.index('id="more-figures"')]
    assert "<th>eval_success</th>" in rounds and "<th>eval_step</th>" in rounds   # the per-round summary
    per_step = rounds[rounds.index("Eval success and flagged rollouts per step"):]
    head = re.search(r"<thead><tr>(.*?)</tr></thead>", per_step).group(1)
    assert re.findall(r"<th>(\w+)</th>", head) == ["step", "round", "rollouts", "flagged", "forgetting", "boundary",
                                                    "rare", "eval_success", "eval_tasks", "evaluations"]
    first = re.search(r"<tbody><tr>(.*?)</tr>", per_step).group(1)   # step 0: the starting policy, evaluated only
    assert re.findall(r"<td[^>]*>([^<]*)</td>", first) == ["0", "", "0", "0", "0", "0", "0", "0.25", "4", "1"]
    by_similarity = rounds[rounds.index("Candidates by similarity to the eval tasks"):]
    assert "<td>[0.9, 1]</td>" in by_similarity and "<td>[0.7, 0.9)</td>" in by_similarity


def test_report_leads_with_the_result(report_path):
    page = report_path.read_text(encoding="utf-8")
    order = [page.index(anchor) for anchor in ('id="headline"', 'id="figure-heldout"', 'id="figure-acceptance"',
                                               'id="patterns"', 'id="details"', 'id="rounds"', 'id="configuration"')]
    assert order == sorted(order)
    head = page[page.index('id="headline"'):page.index('id="figures"')]
    # run_a: evaluated at step 0 (0.25), 2 and 4 (0.75); c0 accepted of 3 candidates
    assert "Held-out success went from 25.0% to 75.0% over 5 training steps" in head and "25.0% → 75.0%" in head
    assert "1 of 3 candidates accepted" in head
    words = page[page.index('id="patterns"'):page.index('id="details"')]
    assert "mixed outcomes on the file system; cd before ls" in words       # the LLM summary, in words
    assert "lineage boundary:a: round 0: " in words and "(grew)" in words   # and its lineage across rounds
    for folded in ("rounds", "more-figures", "pattern-examples", "candidates", "configuration", "headline-sql"):
        assert f'<details id="{folded}">' in page


def test_report_draws_dead_groups_against_step_next_to_the_weights(report_path):
    page = report_path.read_text(encoding="utf-8")
    section = page[page.index('id="group-health"'):page.index('id="patterns"')]
    assert [name for name, _ in DATA_IMAGE.findall(section)] == ["group_health", "distribution"]
    assert "GRPO groups that were dead" in section
    rounds = page[page.index('id="rounds"'):page.index('id="more-figures"')]
    assert "<th>dead_group_share</th>" in rounds   # per round, in the summary


def test_the_headline_is_recomputed_by_its_sql(report_path):
    from coevolve_engine.report.headline import HEADLINE_SQL

    db = report_path.parent / "coevolve.duckdb"
    result = CliRunner().invoke(cli, ["query", HEADLINE_SQL, "--db", str(db), "--format", "json"])
    row = json.loads(result.stdout)[0]
    assert (row["eval_start"], row["eval_end"], row["candidates"], row["accepted"]) == (0.25, 0.75, 3, 1)


def test_compare_puts_two_runs_side_by_side(report_path, tmp_path):
    from test_drift import build_run_b

    db = report_path.parent / "coevolve.duckdb"
    other = build_run_b(tmp_path / "uniform.duckdb")
    out = tmp_path / "compare.html"
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "--compare", str(other), "-o", str(out),
                                      "--no-diversity"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    head = page[page.index('id="headline"'):page.index('id="figures"')]
    assert head.count('class="headline"') == 2 and "<strong>coevolve</strong>" in head and "<strong>uniform</strong>" in head
    assert "<th>eval_success[coevolve]</th>" in page and "<th>eval_success[uniform]</th>" in page
    assert len(DATA_IMAGE.findall(page)) == 11


def test_figures_name_the_extra_when_matplotlib_is_missing(monkeypatch):
    from coevolve_engine.drift import plots

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(CoevolveError, match=r"pip install 'coevolve-engine\[report\]'"):
        plots._pyplot()


# -- in a headless Chromium --------------------------------------------------------------------------------

def chromium() -> str | None:
    for name in (os.environ.get("COEVOLVE_CHROMIUM"), "chromium", "chromium-browser", "google-chrome",
                 "google-chrome-stable", "chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


needs_chromium = pytest.mark.skipif(chromium() is None, reason="no Chromium (apt-get install chromium); "
                                                               ".ci/run installs it")

# Runs after load: how many <img> there are, how many decoded, and every resource the page fetched that is
# not a data: URI; written into the DOM, where --dump-dom shows it.
PROBE = """<script>
window.addEventListener('load', () => {
  const images = [...document.images];
  const result = {images: images.length,
                  decoded: images.filter(i => i.complete && i.naturalWidth > 0).length,
                  sizes: images.map(i => [i.naturalWidth, i.naturalHeight]),
                  resources: performance.getEntriesByType('resource').map(e => e.name)
                                        .filter(n => !n.startsWith('data:'))};
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
});
</script>"""


def run_chromium(page, tmp_path, *extra):
    """Load ``page`` headless with every host resolving to nothing; returns (stdout, the page's requests)."""
    net_log = tmp_path / f"{page.stem}.netlog.json"
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--disable-background-networking", "--disable-component-update", "--no-first-run",
               f"--user-data-dir={tmp_path / 'profile'}", '--host-resolver-rules=MAP * ~NOTFOUND',
               f"--log-net-log={net_log}", "--virtual-time-budget=5000", *extra, page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, page_requests(net_log)


def page_requests(net_log) -> list[str]:
    """URLs the page asked the network stack for. Chromium's own background requests (its initiator is
    'not an origin') are not the page's; a page opened from a file has the opaque origin 'null'."""
    log = json.loads(net_log.read_text())
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    started = [e["params"] for e in log["events"] if e["type"] == start_job and "url" in e.get("params", {})]
    return [p["url"] for p in started
            if p.get("initiator") != "not an origin" and not p["url"].startswith(("data:", "file:"))]


@needs_chromium
def test_report_renders_in_chromium_without_network(report_path, tmp_path):
    page = report_path.read_text(encoding="utf-8")
    # The report forbids scripts; this copy allows inline ones, only to run the probe. Nothing else changes.
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';")
                      .replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom, requests = run_chromium(probed, tmp_path, "--dump-dom")
    result = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dom).group(1))
    assert result["images"] == 11 and result["decoded"] == 11, result
    assert all(width > 100 and height > 100 for width, height in result["sizes"])
    assert result["resources"] == [] and requests == []
    # The report itself, unmodified, as a screenshot; still no request.
    shot = tmp_path / "report.png"
    _, requests = run_chromium(report_path, tmp_path, f"--screenshot={shot}", "--window-size=1280,2400",
                               "--hide-scrollbars")
    assert requests == [] and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    if os.environ.get("COEVOLVE_KEEP_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["COEVOLVE_KEEP_SCREENSHOT"])


@needs_chromium
def test_the_network_check_sees_a_request_and_the_csp_blocks_it(report_path, tmp_path):
    page = report_path.read_text(encoding="utf-8")
    tracer = '<img src="http://tracer.invalid/pixel.png"></body>'
    without_csp = tmp_path / "without_csp.html"
    without_csp.write_text(page.replace('http-equiv="Content-Security-Policy"', 'name="no-csp"')
                           .replace("</body>", tracer), encoding="utf-8")
    _, requests = run_chromium(without_csp, tmp_path, "--dump-dom")
    assert requests == ["http://tracer.invalid/pixel.png"]      # the check would see a request
    with_csp = tmp_path / "with_csp.html"
    with_csp.write_text(page.replace("</body>", tracer), encoding="utf-8")
    _, requests = run_chromium(with_csp, tmp_path, "--dump-dom")
    assert requests == []                                          # and the report's CSP forbids it


FIRST_SCREEN_PROBE = """<script>
window.addEventListener('load', () => {
  const box = id => { const r = document.getElementById(id).getBoundingClientRect();
                      return {top: r.top, bottom: r.bottom, width: r.width, height: r.height}; };
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({viewport: [window.innerWidth, window.innerHeight],
                                    headline: box('headline'), figure: box('figure-heldout')});
  document.body.appendChild(out);
});
</script>"""


@needs_chromium
@pytest.mark.parametrize("compare", [False, True], ids=["one run", "two runs"])
def test_the_headline_and_the_first_figure_are_on_the_first_screen(report_path, tmp_path, compare):
    page_path = report_path
    if compare:
        from test_drift import build_run_b

        page_path = tmp_path / "compare.html"
        other = build_run_b(tmp_path / "uniform.duckdb")
        assert CliRunner().invoke(cli, ["report", "--db", str(report_path.parent / "coevolve.duckdb"), "--compare",
                                        str(other), "-o", str(page_path), "--no-diversity"]).exit_code == 0
    page = page_path.read_text(encoding="utf-8")
    probed = tmp_path / "first_screen.html"
    probed.write_text(page.replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';")
                      .replace("</body>", FIRST_SCREEN_PROBE + "</body>"), encoding="utf-8")
    dom, _ = run_chromium(probed, tmp_path, "--dump-dom", "--window-size=1280,800")
    found = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dom).group(1))
    height = found["viewport"][1]
    assert found["viewport"][0] == 1280 and height <= 800, found
    assert 0 <= found["headline"]["top"] and found["headline"]["bottom"] <= height, found
    assert found["figure"]["height"] > 150 and found["figure"]["bottom"] <= height, found
