"""What a run of ``python -m bench`` leaves behind, all from the same figures:

- ``bench/results.json``: every benchmark's figures from its last run, with that run's command,
  date and machine. A run replaces the figures of the benchmarks it measured and keeps the
  others' (``--only`` runs add up);
- ``bench/RESULTS.md``: those figures at the top, run by run; then the figures of benchmarks not
  run since results.json began, kept as Markdown rows until a run replaces them; then the
  history (the dated sections of earlier runs), kept as it is;
- ``docs/performance.md`` and its charts (``docs/assets/bench/*.svg``, bench/charts.py): the
  goals and verdicts, a turn's cost against the chat's length, CPU per answer beside ADK's.

``python -m bench.charts`` does all but the first again from results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bench.charts import Axes, Key, Point, Series, bar_chart, line_chart
from bench.core import (
    ROOT,
    Figure,
    benchmark_number,
    figure_from_json,
    figure_to_json,
    goal_text,
    spread,
    table,
)

CARRIED = "## Earlier figures still current"
HISTORY = "## History"
NOTES_HEADING = "## Notes on the figures"  # the page's own prose, kept by every run
FORMAT = 1


@dataclass(frozen=True)
class Paths:
    json: Path
    results: Path
    page: Path
    charts: Path


DEFAULT_PATHS = Paths(
    json=ROOT / "bench" / "results.json",
    results=ROOT / "bench" / "RESULTS.md",
    page=ROOT / "docs" / "performance.md",
    charts=ROOT / "docs" / "assets" / "bench",
)


def add_path_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", type=Path, default=DEFAULT_PATHS.results, help="RESULTS.md")
    parser.add_argument("--json", type=Path, default=DEFAULT_PATHS.json, help="results.json")
    parser.add_argument(
        "--page", type=Path, default=DEFAULT_PATHS.page, help="the site's performance page"
    )
    parser.add_argument(
        "--charts", type=Path, default=DEFAULT_PATHS.charts, help="the folder of its charts"
    )


def paths_from(args: argparse.Namespace) -> Paths:
    return Paths(json=args.json, results=args.output, page=args.page, charts=args.charts)


# -- the runs -----------------------------------------------------------------------------------


@dataclass
class Run:
    """One invocation of ``python -m bench``: what it ran and where, and its figures."""

    command: str
    when: str  # "YYYY-MM-DD HH:MM UTC"
    minutes: float
    repeats: str  # over what each median is taken, in words
    machine: dict[str, str]
    figures: list[Figure] = field(default_factory=list)

    def numbers(self) -> list[int]:
        return sorted({benchmark_number(f.benchmark) for f in self.figures})


def load_runs(path: Path) -> list[Run]:
    if not path.exists():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    return [
        Run(
            command=r["command"],
            when=r["when"],
            minutes=r["minutes"],
            repeats=r["repeats"],
            machine=r["machine"],
            figures=[figure_from_json(f) for f in r["figures"]],
        )
        for r in data["runs"]
    ]


def save_runs(path: Path, runs: list[Run]) -> None:
    data = {
        "format": FORMAT,
        "about": "Written by python -m bench (bench/publish.py): each benchmark's figures from "
        "its last run, newest run first. Values are per run, ours and theirs.",
        "runs": [
            {
                "command": r.command,
                "when": r.when,
                "minutes": round(r.minutes, 1),
                "repeats": r.repeats,
                "machine": r.machine,
                "figures": [figure_to_json(f) for f in r.figures],
            }
            for r in runs
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def merge(runs: list[Run], new: Run) -> list[Run]:
    """``new`` first; earlier runs keep only the figures of benchmarks ``new`` did not measure,
    and go when none is left. A run with no figure changes nothing."""
    if not new.figures:
        return runs
    measured = set(new.numbers())
    kept = []
    for run in runs:
        figures = [f for f in run.figures if benchmark_number(f.benchmark) not in measured]
        if figures:
            kept.append(Run(run.command, run.when, run.minutes, run.repeats, run.machine, figures))
    return [new, *kept]


def publish(new: Run, paths: Paths = DEFAULT_PATHS) -> None:
    """Add a run's figures to results.json, then write RESULTS.md, the page and its charts."""
    save_runs(paths.json, merge(load_runs(paths.json), new))
    render(paths)


def render(paths: Paths = DEFAULT_PATHS) -> None:
    runs = load_runs(paths.json)
    previous = paths.results.read_text(encoding="utf-8") if paths.results.exists() else ""
    carried = carried_rows(_section(previous, CARRIED), _measured(runs))
    paths.results.parent.mkdir(parents=True, exist_ok=True)
    paths.results.write_text(results_text(runs, previous), encoding="utf-8")
    paths.charts.mkdir(parents=True, exist_ok=True)
    drawn = draw_charts(runs)
    for name, svg in drawn.items():
        (paths.charts / name).write_text(svg, encoding="utf-8")
    for name in CHART_NAMES - drawn.keys():  # a chart whose figures are gone
        (paths.charts / name).unlink(missing_ok=True)
    paths.page.parent.mkdir(parents=True, exist_ok=True)
    page = paths.page.read_text(encoding="utf-8") if paths.page.exists() else ""
    notes = _section(page, NOTES_HEADING)
    text = page_text(runs, carried, paths, drawn)
    paths.page.write_text(text + ("\n" + notes if notes else ""), encoding="utf-8")


def _measured(runs: Iterable[Run]) -> set[int]:
    return {n for run in runs for n in run.numbers()}


# -- RESULTS.md ---------------------------------------------------------------------------------


def _para(text: str) -> str:
    """A paragraph of prose, wrapped as the project's Markdown is."""
    return textwrap.fill(text, 96, break_long_words=False, break_on_hyphens=False)


def _numbers_text(numbers: list[int]) -> str:
    names = [str(n) for n in numbers]
    if len(names) == 1:
        return f"Benchmark {names[0]}"
    return f"Benchmarks {', '.join(names[:-1])} and {names[-1]}"


def _section(text: str, heading: str) -> str:
    """From the line ``heading`` to the next heading of its level (to the end for HISTORY)."""
    lines = text.splitlines()
    if heading not in lines:
        return ""
    start = lines.index(heading)
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
        len(lines),
    )
    if heading in (HISTORY, NOTES_HEADING):  # the last section, whatever headings it holds
        end = len(lines)
    return "\n".join(lines[start:end]).strip() + "\n"


def _is_row(line: str) -> bool:
    """A figure's row of a results table: its first cell starts with a benchmark's number."""
    return bool(re.match(r"\| \d+ ", line))


def carried_rows(section: str, measured: set[int]) -> list[tuple[str, list[str]]]:
    """The rows of the carried section still current, each with its block's heading."""
    rows = []
    heading = ""
    for line in section.splitlines():
        if line.startswith("### "):
            heading = line[4:]
        elif _is_row(line):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if benchmark_number(cells[0]) not in measured:
                rows.append((heading, cells))
    return rows


def _carried_text(section: str, measured: set[int]) -> str:
    """The carried section without the rows of benchmarks measured since, and without a block
    (``### ``) that has no row left."""
    head, *blocks = re.split(r"^(?=### )", section, flags=re.M)
    kept = []
    for block in blocks:
        lines = [
            line
            for line in block.splitlines()
            if not _is_row(line) or benchmark_number(line[2:]) not in measured
        ]
        if any(_is_row(line) for line in lines):
            kept.append("\n".join(lines).strip())
    if not kept:
        return ""
    return "\n\n".join([head.strip(), *kept]) + "\n"


def results_text(runs: list[Run], previous: str) -> str:
    """RESULTS.md: the runs in results.json, the carried figures left, the notes, the history."""
    parts = [
        "# Benchmark results",
        _para(
            "The current figures: every benchmark's last run, newest first. `python -m bench` "
            "writes this part, `bench/results.json` and the charts of `docs/performance.md` from "
            "the same run; a run with `--only` replaces the figures of the benchmarks it ran and "
            "keeps the others. How the figures are made, and what each comparison is: "
            "[README.md](README.md)."
        ),
        _para(
            "Every figure is the **median (min–max) over the runs** its section names. In each run "
            "ours and its comparison are measured back to back on the same machine, and **ratio** "
            "is ours / theirs for that run (median and range of the per-run ratios): below 1 means "
            "ours takes less time or memory; for per-second figures above 1 means ours does more. "
            "A goal bounds the median ratio, unless it says otherwise."
        ),
    ]
    for run in runs:
        facts = "\n".join(f"| {k} | {v} |" for k, v in run.machine.items())
        parts += [
            f"## {_numbers_text(run.numbers())}",
            _para(
                f"`{run.command}` on {run.when}, in {run.minutes:.1f} minutes; each median "
                f"over {run.repeats}."
            ),
            f"| machine | |\n| --- | --- |\n{facts}",
            table(run.figures),
        ]
    carried = _carried_text(_section(previous, CARRIED), _measured(runs))
    history = _section(previous, HISTORY)
    parts += [p for p in (carried, NOTES, history) if p]
    return "\n\n".join(p.strip() for p in parts) + "\n"


NOTES = """## Reading the numbers

- **Converter vs the orjson floor** (goal ≤ 3x, missed): the floor only serialises ready-made
  dicts in Rust (about 0.15 µs a chunk) and never looks at an ADK event. Only reading of the
  events what the converter reads (the "only reading the ADK events" row, our own floor) already
  costs about 2.4x the orjson floor, and that reading followed by the orjson floor's writing, with
  nothing between (the "bare floor" row), 3.4–3.9x: no converter that reads the events ours reads
  and writes with orjson can come within 3x. On top of that ours decides steps and blocks and
  makes each chunk a pydantic object: the chunks of every streamed word (steps, text and reasoning
  blocks and deltas) are built without validation (0.45 µs) and written with orjson, the rest
  validated and written by pydantic-core (docs/adr/0050; earlier rounds in docs/adr/0018). Tests
  hold every chunk the converter emits to the catalogue and to pydantic's bytes. Closer would need
  chunks that are not pydantic objects, which the turns, recording and coalescing code consume.
- **End-to-end**: the benchmark model streams with no pause, so the figures are the servers' own
  cost, and most of it is ADK's: `Runner.run_async` with its per-event telemetry costs about
  0.3–0.5 ms per partial in either server. In a py-spy profile of our server under the `/stream`
  load, under 4% of the samples are self time in the bridge's own code (`adk_stream_protocol`
  2.2%, `sse_starlette` 1.3%, which ADR 0052 replaced); ADK and the pydantic models it builds take
  most of the rest.
- **500 concurrent `/stream`**: one server process on one core; every answer costs about 25 ms
  of CPU, nearly all of it ADK's, so 500 arrivals at once queue for seconds in both servers,
  and p50/p99 measure that queue (which server is ahead changes from run to run). The
  CPU-per-answer rows, ours against ADK's, show the bridge's own cost.
- **500 `/live` sockets**: ours starts each socket's ADK live run at its first message (the
  session must hold what the client sent first); ADK's `/run_live` starts it when the socket
  opens, which no figure here times. So the first turn of every socket carries the run's start
  on ours only (the "first turns" row), and later turns that land while other sockets start
  their runs queue behind that work. The start is ADK's own work (about 3.5 ms of CPU
  unloaded: first turn 11.5 ms, later turns 8 ms); our transport opens the socket when the
  first message is sent, so starting at connect would move that cost, not remove it
  (docs/adr/0018). CPU per turn and memory per socket are close to ADK's.
- **Approvals**: by default (docs/adr/0010) a continuation is held until its run ends, so the
  tool's result arrives together with the whole answer after it (on `/live` the offline live
  model paces its answer, about 35 ms); with `ADK_STREAM_STREAM_INTERMEDIATE_RESULTS=true` it
  streams as it comes. ADK's figure includes a new `run_async` (the approval is a new request).
  The hold-back is the price of the seed's client rule, which also forbids an earlier call's
  result in a response that stops at another approval; whether it stops is known only when
  the run ends, so the result cannot go early (docs/adr/0018).
- **Memory per open stream** is (peak RSS − RSS after warm-up) / streams, on a fresh server per
  run; it includes the ADK session, the run and the server's side of the connection.
- **Start-up**: ours imports less than ADK's `get_fast_api_app` (its CLI, web server and
  services), so both first `/health` and the first answer come sooner.
- **Load shedding** (benchmark 6): with the cap, the first 100 requests are served while the
  other 400 are refused at once, so the served ones no longer queue behind all 500 and a
  refused client hears back long before a queued one would see text. "At once" is not
  milliseconds at 500 simultaneous arrivals: asyncio runs the 500 handlers in step, so each
  503 leaves only after HTTP parsing, the middlewares and routing have run for nearly all of
  them (about 1.6 ms of CPU per refused request). Served answers per second stay about the
  same: the answers cost the same CPU either way.
- **Event-loop lag** (benchmark 6): the slowest `/health` while a message at the text limit
  is answered. The request body is read off the event loop (docs/adr/0019), and so is the
  demo model's reading of a message over 16,000 characters: its rules are linear in the
  length, but not free at 200,000 characters (60–170 ms).
"""


# -- the charts ---------------------------------------------------------------------------------

STORES = ("SQLite", "PostgreSQL")
CHART_NAMES = {
    "longchats-cpu.svg",
    "longchats-history.svg",
    "longchats-written.svg",
    "cpu-per-answer.svg",
}


def _figures(runs: Iterable[Run]) -> dict[tuple[str, str], tuple[Figure, Run]]:
    return {(f.benchmark, f.metric): (f, run) for run in runs for f in run.figures}


def _point(x: float, values: list[float]) -> Point:
    return Point(x, statistics.median(values), min(values), max(values))


def _by_length(
    found: dict[tuple[str, str], tuple[Figure, Run]],
    store: str,
    metric: str,
    side: Callable[[Figure], list[float]],
) -> tuple[Point, ...]:
    """Benchmark 13's points for one store: ``side`` of each length's ``metric``
    (``"{N} prior: " + metric``, or one that starts so), in order of length."""
    points = []
    for (benchmark, name), (figure, _) in found.items():
        head, _, rest = name.partition(" prior: ")
        if benchmark != f"13 long chats {store}" or not head.isdigit():
            continue
        values = side(figure)
        if rest.startswith(metric) and values:
            points.append(_point(int(head), values))
    return tuple(sorted(points, key=lambda p: p.x))


def _values(series: Series) -> list[list[float]]:
    """Each point's median, min and max, for spread()."""
    return [[p.low, p.value, p.high] for p in series.points]


def _ours(f: Figure) -> list[float]:
    return f.ours


def _theirs(f: Figure) -> list[float]:
    return f.theirs


def _ratios(f: Figure) -> list[float]:
    return f.ratios()


def long_chat_series(runs: list[Run], metric: str, with_recipe: bool = False) -> list[Series]:
    """Ours and ADK's (and ours with the recipe's body) against the chat's length, a line per
    store: colour for the server, dashes for PostgreSQL."""
    found = _figures(runs)
    series = []
    for store in STORES:
        dashed = store == "PostgreSQL"
        sides: list[tuple[str, str, Callable[[Figure], list[float]], int]] = [
            (f"ours, {store}", metric, _ours, 0),
            (f"ADK's server, {store}", metric, _theirs, 1),
        ]
        if with_recipe:
            sides.append(
                (f"ours, recipe body, {store}", f"recipe body {{id, message}}: {metric}", _ours, 2)
            )
        for name, wanted, side, colour in sides:
            points = _by_length(found, store, wanted, side)
            if points:
                series.append(Series(name, points, colour, dashed))
    return series


def cpu_per_answer(runs: list[Run]) -> tuple[list[str], list[Series]]:
    """Benchmark 3's server CPU per answer, ours and ADK's, per transport."""
    found = _figures(runs)
    groups, ours, theirs = [], [], []
    for transport in ("/stream", "/live"):
        hit = found.get((f"3 concurrency {transport}", "server CPU per answer"))
        if hit is None or not hit[0].ours or not hit[0].theirs:
            continue
        figure = hit[0]
        groups.append(f"{transport} (ADK: {figure.comparison.removeprefix('ADK ')})")
        ours.append(_point(len(groups), figure.ours))
        theirs.append(_point(len(groups), figure.theirs))
    if not groups:
        return [], []
    return groups, [Series("ours", tuple(ours), 0), Series("ADK's server", tuple(theirs), 1)]


def _keys(series: list[Series]) -> list[Key]:
    """A legend for lines coloured by server and dashed by store: each server's colour once,
    then each store's line style."""
    keys: dict[str, Key] = {}
    for s in series:
        who, _, store = s.name.rpartition(", ")
        keys.setdefault(who, Key(who, s.colour))
        keys.setdefault(store, Key(store, None, s.dashed))
    servers = [k for k in keys.values() if k.colour is not None]
    return servers + [k for k in keys.values() if k.colour is None]


def draw_charts(runs: list[Run]) -> dict[str, str]:
    """The charts whose figures are in ``runs``, by file name."""
    charts: dict[str, str] = {}
    length = "prior turns in the chat"
    cpu = long_chat_series(runs, "server CPU per turn", with_recipe=True)
    if cpu:
        axes = Axes("A turn's server CPU against the chat's length", length, "CPU per turn (ms)")
        charts["longchats-cpu.svg"] = line_chart(axes, cpu, legend=_keys(cpu))
    history = long_chat_series(runs, "history loading")
    if history:
        axes = Axes("History loading per turn (session reads)", length, "CPU (ms)")
        charts["longchats-history.svg"] = line_chart(axes, history, legend=_keys(history))
    found = _figures(runs)
    written = [
        Series(f"ours / ADK's, {store}", points, 0, dashed=store == "PostgreSQL")
        for store in STORES
        if (points := _by_length(found, store, "bytes written per turn", _ratios))
    ]
    if written:
        axes = Axes("Bytes written per turn, ours / ADK's server", length, "ratio ours / ADK's")
        goal = (2.0, "goal: at most 2x")
        charts["longchats-written.svg"] = line_chart(axes, written, goal, _keys(written))
    groups, series = cpu_per_answer(runs)
    if series:
        axes = Axes("Server CPU per answer, many at once", "transport", "CPU per answer (ms)")
        charts["cpu-per-answer.svg"] = bar_chart(axes, groups, series)
    return charts


# -- docs/performance.md ------------------------------------------------------------------------


def _ms(values: list[float]) -> str:
    return spread(values) if values else "–"


def _source(runs: list[Run], number: int) -> str:
    run = next((r for r in runs if number in r.numbers()), None)
    if run is None:
        return ""
    return f"From `{run.command}` on {run.when} (median (min–max) over {run.repeats})."


def _link(paths: Paths, target: Path) -> str:
    """A link from the page to a file of the repository, named by its path there."""
    href = Path(os.path.relpath(target, paths.page.parent)).as_posix()
    shown = Path(os.path.relpath(target, paths.page.parent.parent)).as_posix()
    return f"[`{shown}`]({href})"


def _image(paths: Paths, name: str, alt: str) -> str:
    target = Path(os.path.relpath(paths.charts / name, paths.page.parent)).as_posix()
    return f"![{alt}]({target})"


def _at_longest(runs: list[Run], store: str, metric: str) -> tuple[int, Figure] | None:
    """Benchmark 13's figure for ``metric`` at the longest chat measured on ``store``."""
    best: tuple[int, Figure] | None = None
    for (benchmark, name), (figure, _) in _figures(runs).items():
        head, _, rest = name.partition(" prior: ")
        wanted = benchmark == f"13 long chats {store}" and head.isdigit() and rest == metric
        if wanted and figure.ours and (best is None or int(head) > best[0]):
            best = (int(head), figure)
    return best


def _long_chat_caption(runs: list[Run], metric: str) -> str:
    """Ours and ADK's ``metric`` at the longest chat, on each store, in words."""
    said = []
    for store in STORES:
        hit = _at_longest(runs, store, metric)
        if hit is not None:
            length, f = hit
            said.append(
                f"{store} at {length} prior turns, ours {_ms(f.ours)} ms, ADK's "
                f"{_ms(f.theirs)} ms (ratio {_ms(f.ratios())})"
            )
    return "; ".join(said)


def goals_table(runs: list[Run], carried: list[tuple[str, list[str]]]) -> str:
    """Every figure with a goal: from results.json, then the carried rows; by benchmark."""
    lines = [
        "| benchmark | figure | comparison | ours | theirs | ratio | goal | verdict | run |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows: list[tuple[int, list[str]]] = []
    for run in runs:
        for f in run.figures:
            if goal_text(f) or f.na:
                metric = f"{f.metric} ({f.unit})" if f.unit else f.metric
                cells = [f.benchmark, metric, f.comparison, spread(f.ours), spread(f.theirs)]
                cells += [spread(f.ratios()), goal_text(f), f.verdict(), run.when[:10]]
                rows.append((benchmark_number(f.benchmark), cells))
    for heading, cells in carried:
        if len(cells) >= 8 and cells[6]:
            when = re.search(r"\d{4}-\d{2}-\d{2}", heading)
            metric = cells[1].split(" <br>")[0]  # without its note
            ordered = [cells[0], metric, cells[3], cells[2], *cells[4:8]]
            rows.append((benchmark_number(cells[0]), [*ordered, when[0] if when else "earlier"]))
    rows.sort(key=lambda r: r[0])  # stable: each run's order within a benchmark
    return "\n".join([*lines, *("| " + " | ".join(cells) + " |" for _, cells in rows)])


def _load_notes(runs: list[Run]) -> dict[str, str]:
    """Benchmark 3's load per transport ("/stream" -> ", 500 at once"), from its notes."""
    notes = {}
    for (benchmark, metric), (figure, _) in _figures(runs).items():
        wanted = metric == "time to first text p50" and figure.note
        if benchmark.startswith("3 concurrency ") and wanted:
            notes[benchmark.removeprefix("3 concurrency ")] = f", {figure.note}"
    return notes


def page_text(
    runs: list[Run], carried: list[tuple[str, list[str]]], paths: Paths, drawn: dict[str, str]
) -> str:
    parts = [
        "# Performance",
        "<!-- Written by `python -m bench` (bench/publish.py) from bench/results.json, and by "
        "`python -m bench.charts` without a run: edit the section 'Notes on the figures' at "
        "the end, which they keep; the rest is overwritten. -->",
        "Every figure is measured against a comparison in the same run on the same machine: "
        "ADK's own server (`get_fast_api_app`, `POST /run_sse` and "
        "`/run_live`) serving the same agent and the same offline model, or our own server "
        f"with a setting off. The full tables, the machine of each run and the history are in "
        f"{_link(paths, paths.results)}; how each figure is made, in "
        f"{_link(paths, paths.results.with_name('README.md'))}. One command runs "
        "them all again and rewrites this page: `python -m bench`, after "
        "`pip install -e '.[bench]'` (`--only longchats` for one benchmark). "
        "`python -m bench.charts` draws the charts again from `bench/results.json` "
        "without a run.",
        "## Goals and verdicts",
        "A goal bounds the median ratio ours / theirs unless it says otherwise; the run column "
        "gives the date of the run the figure comes from.",
        goals_table(runs, carried),
    ]
    if "longchats-cpu.svg" in drawn:
        parts += [
            "## A turn's cost against the chat's length",
            "Benchmark 13: chats of growing length (each prior turn a 200-character question, "
            "a tool call with 1 KB of output and a 150-word answer), then the next turn, on "
            "SQLite and on PostgreSQL. Stock `useChat` posts the whole chat with every turn; "
            "the recipe's body `{id, message}` only the new message.",
            _image(paths, "longchats-cpu.svg", "A turn's server CPU against the chat's length"),
            f"*The server's CPU for the next turn. "
            f"{_long_chat_caption(runs, 'server CPU per turn')}. Lines are medians, bars "
            f"the range over the rounds. {_source(runs, 13)}*",
        ]
    if "longchats-history.svg" in drawn:
        parts += [
            _image(paths, "longchats-history.svg", "History loading per turn"),
            "*The CPU of a turn's session reads, the chat's history loaded for the turn. "
            f"{_long_chat_caption(runs, 'history loading (session reads' + chr(39) + ' CPU)')}.*",
        ]
    if "longchats-written.svg" in drawn:
        parts += [
            _image(paths, "longchats-written.svg", "Bytes written per turn, ours / ADK's"),
            "*What a turn writes, over what ADK's own server writes for the same turn "
            "(SQLite: the server's writes reaching the disk; PostgreSQL: its WAL).*",
        ]
    if "cpu-per-answer.svg" in drawn:
        groups, series = cpu_per_answer(runs)
        load = _load_notes(runs)
        said = "; ".join(
            f"{group}{load.get(group.split(' ')[0], '')}: ours {_ms(ours)} ms, ADK's {_ms(adk)} ms"
            for group, ours, adk in zip(groups, _values(series[0]), _values(series[1]), strict=True)
        )
        parts += [
            "## CPU per answer",
            "Benchmark 3: many requests at once (`POST /stream` against ADK's "
            "`POST /run_sse`, and `/live` sockets against ADK's `/run_live`); the server "
            "process's CPU over the load, per answer. ag-ui-adk is not measured by any "
            "benchmark, so the comparison is ADK's own server only.",
            _image(paths, "cpu-per-answer.svg", "Server CPU per answer, ours and ADK's"),
            f"*Per answer, median (range over the runs): {said}. {_source(runs, 3)}*",
        ]
    prose = (p if p.startswith(("|", "!", "#", "<!--")) else _para(p) for p in parts)
    return "\n\n".join(prose) + "\n"
