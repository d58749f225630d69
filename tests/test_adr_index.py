"""The design records (docs/adr/) and their index: every record is listed once, under its own
title and status; every link of the index leads to a record; every record has a status, and a
record another one supersedes names one that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ADR = Path(__file__).resolve().parent.parent / "docs" / "adr"
RECORD_NAME = re.compile(r"^\d{4}-[a-z0-9-]+\.md$")
TITLE = re.compile(r"^# (\d{4})\. (.+)$")
STATUS = re.compile(r"^- Status: (.+)$", re.MULTILINE)
# A row of the index: | number | [title](file) | status |; "superseded" is in bold.
ROW = re.compile(r"^\| (\d{4}) \| \[(.+)\]\(([^)]+)\) \| (.+) \|$")
LINK = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")
SUPERSEDED = re.compile(r"^superseded by \[(\d{4})\]\((\d{4}-[a-z0-9-]+\.md)\)")


def records(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.md") if RECORD_NAME.match(p.name))


def title_and_status(record: Path) -> tuple[str, str]:
    """A record's title (its first line) and its status line, as written."""
    text = record.read_text()
    heading = TITLE.match(text.splitlines()[0])
    assert heading, f"{record.name}: the first line is '# NNNN. Title'"
    assert heading.group(1) == record.name[:4], f"{record.name}: its heading has another number"
    status = STATUS.search(text)
    assert status, f"{record.name}: no '- Status:' line"
    return heading.group(2), status.group(1)


def expected_row(record: Path) -> str:
    title, status = title_and_status(record)
    if status.startswith("superseded"):
        status = f"**superseded**{status.removeprefix('superseded')}"
    return f"| {record.name[:4]} | [{title}]({record.name}) | {status} |"


def index_problems(folder: Path) -> list[str]:
    """What is wrong between the records of ``folder`` and its index.md, one line each."""
    problems: list[str] = []
    index = (folder / "index.md").read_text()
    listed: dict[str, str] = {}
    for line in index.splitlines():
        row = ROW.match(line)
        if row is None:
            continue
        name = row.group(3)
        if name in listed:
            problems.append(f"{name} is listed twice")
        listed[name] = line
    for target in LINK.findall(index):
        if not (folder / target).is_file():
            problems.append(f"the index links to {target}, which does not exist")
    for record in records(folder):
        expected = expected_row(record)
        if record.name not in listed:
            missing = f"{record.name} is not in the index; its row, under its area:"
            problems.append(f"{missing}\n{expected}")
        elif listed[record.name] != expected:
            problems.append(
                f"{record.name}: the index's row differs from the record's title or status;"
                f" it should read:\n{expected}"
            )
    return problems


def status_problems(folder: Path) -> list[str]:
    """Records without a status, or superseded by a record that does not exist."""
    problems: list[str] = []
    for record in records(folder):
        _, status = title_and_status(record)
        if not re.match(r"(accepted|superseded by )", status):
            problems.append(f"{record.name}: status '{status}' is neither accepted nor superseded")
        superseded = SUPERSEDED.match(status)
        if status.startswith("superseded") and superseded is None:
            problems.append(f"{record.name}: write 'superseded by [NNNN](NNNN-name.md)'")
        if superseded is not None:
            number, target = superseded.groups()
            if not target.startswith(number) or not (folder / target).is_file():
                problems.append(f"{record.name}: superseded by {target}, which does not exist")
        for target in re.findall(r"\]\((\d{4}-[a-z0-9-]+\.md)\)", status):
            if not (folder / target).is_file():
                problems.append(f"{record.name}: its status links to {target}, which is missing")
    return problems


def rewrite_rows(folder: Path) -> list[str]:
    """Set every row of the index to its record's title and status, where it stands; the
    records the index lacks are returned, for a person to place under their area."""
    index = folder / "index.md"
    lines = index.read_text().splitlines()
    for i, line in enumerate(lines):
        row = ROW.match(line)
        if row is not None and (folder / row.group(3)).is_file():
            lines[i] = expected_row(folder / row.group(3))
    index.write_text("\n".join(lines) + "\n")
    return [
        record.name for record in records(folder) if f"]({record.name})" not in index.read_text()
    ]


def test_every_record_is_in_the_index_once_under_its_title_and_status() -> None:
    assert records(ADR), "no records found"
    assert index_problems(ADR) == []


def test_every_record_has_a_status_and_a_superseded_one_names_its_successor() -> None:
    assert status_problems(ADR) == []


def _copy(tmp_path: Path) -> Path:
    for path in [*records(ADR), ADR / "index.md"]:
        (tmp_path / path.name).write_text(path.read_text())
    return tmp_path


def test_a_record_missing_from_the_index_is_named(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    index = (folder / "index.md").read_text()
    record = records(folder)[0]
    (folder / "index.md").write_text(
        "\n".join(line for line in index.splitlines() if f"]({record.name})" not in line)
    )
    assert [p.split(";")[0] for p in index_problems(folder)] == [
        f"{record.name} is not in the index"
    ]


def test_a_link_to_no_record_and_a_stale_status_are_named(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    index = (folder / "index.md").read_text()
    record = records(folder)[1]
    text = record.read_text()
    status = STATUS.search(text)
    assert status
    record.write_text(text.replace(status.group(0), "- Status: accepted, amended by 9998"))
    (folder / "index.md").write_text(index + "\nSee [a lost record](9999-lost.md).\n")
    problems = index_problems(folder)
    assert "the index links to 9999-lost.md, which does not exist" in problems
    assert any(p.startswith(f"{record.name}: the index's row differs") for p in problems)


@pytest.mark.parametrize(
    ("status", "problem"),
    [
        ("superseded by [0999](0999-gone.md)", "superseded by 0999-gone.md, which does not exist"),
        ("superseded by 0001", "write 'superseded by [NNNN](NNNN-name.md)'"),
        ("proposed", "status 'proposed' is neither accepted nor superseded"),
    ],
)
def test_a_bad_status_is_named(tmp_path: Path, status: str, problem: str) -> None:
    folder = _copy(tmp_path)
    record = records(folder)[0]
    text = record.read_text()
    found = STATUS.search(text)
    assert found
    record.write_text(text.replace(found.group(0), f"- Status: {status}"))
    assert f"{record.name}: {problem}" in status_problems(folder)


def test_a_record_without_a_status_fails(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    record = records(folder)[0]
    text = record.read_text()
    found = STATUS.search(text)
    assert found
    record.write_text(text.replace(found.group(0), ""))
    with pytest.raises(AssertionError, match="no '- Status:' line"):
        status_problems(folder)


def test_a_superseded_record_is_marked_in_the_index(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    record, successor = records(folder)[:2]
    text = record.read_text()
    found = STATUS.search(text)
    assert found
    status = f"superseded by [{successor.name[:4]}]({successor.name})"
    record.write_text(text.replace(found.group(0), f"- Status: {status}"))
    assert status_problems(folder) == []
    [problem] = index_problems(folder)
    marked = f"| **superseded** by [{successor.name[:4]}]({successor.name}) |"
    assert problem.startswith(f"{record.name}: the index's row differs")
    assert problem.endswith(marked)
    row = problem.splitlines()[-1]
    index = (folder / "index.md").read_text()
    (folder / "index.md").write_text(
        "\n".join(row if f"]({record.name})" in line else line for line in index.splitlines())
    )
    assert index_problems(folder) == []


def test_rewriting_the_rows_follows_the_records(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    record = records(folder)[0]
    text = record.read_text()
    found = STATUS.search(text)
    assert found
    record.write_text(text.replace(found.group(0), "- Status: accepted, amended by 9998"))
    (folder / "0999-new.md").write_text("# 0999. New\n\n- Status: accepted\n")
    assert rewrite_rows(folder) == ["0999-new.md"]
    assert [p.split(";")[0] for p in index_problems(folder)] == ["0999-new.md is not in the index"]


if __name__ == "__main__":
    # After records change (a merge, a new status): `python tests/test_adr_index.py`.
    for name in rewrite_rows(ADR):
        print(f"not in the index, place it under its area: {name}")
