"""`vcpilot logs parse` groups Loghub's lines at least as well as Drain's published figures, with one configuration."""

from __future__ import annotations

import base64
import csv
import json
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from components.logs.cli import app
from components.logs.masking import MASK
from components.logs.parse import COLUMNS, MALFORMED_EVENT, grouping_accuracy, parse_files
from components.logs.templates import Miner, MinerSettings, _ConstantTokenDrain

# Drain's grouping accuracy on the Loghub 2k datasets, as published with Loghub's benchmark.
DRAIN_PUBLISHED = {
    "HDFS": 0.998,
    "Apache": 1.0,
    "OpenSSH": 0.788,
    "Zookeeper": 0.967,
    "Hadoop": 0.948,
    "Spark": 0.920,
}


def events(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [row["EventId"] for row in csv.DictReader(handle)]


@pytest.mark.parametrize("dataset", sorted(DRAIN_PUBLISHED))
def test_grouping_accuracy_on_loghub_is_at_least_drains(shared_dir: Path, tmp_path: Path, dataset: str) -> None:
    folder = shared_dir / "datasets" / "loghub" / dataset
    out = tmp_path / f"{dataset}.csv"
    result = CliRunner().invoke(app, ["parse", str(folder / f"{dataset}_2k.log"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    truth = events(folder / f"{dataset}_2k.log_structured.csv")
    predicted = events(out)
    assert len(predicted) == len(truth) == 2000
    accuracy = grouping_accuracy(truth, predicted)
    assert accuracy >= DRAIN_PUBLISHED[dataset], f"{dataset}: {accuracy:.4f} < {DRAIN_PUBLISHED[dataset]}"


def test_grouping_accuracy_counts_a_line_only_when_its_whole_group_is_right() -> None:
    truth = ["A", "A", "B", "B", "C"]
    # A is split in two (both lines wrong), B and C are exactly right.
    assert grouping_accuracy(truth, ["1", "2", "3", "3", "4"]) == pytest.approx(3 / 5)
    # B and C merged: only A's two lines are right.
    assert grouping_accuracy(truth, ["1", "1", "2", "2", "2"]) == pytest.approx(2 / 5)
    with pytest.raises(ValueError, match="line counts differ"):
        grouping_accuracy(truth, ["1"])


def test_every_input_line_gets_a_row_with_its_final_template(tmp_path: Path) -> None:
    source = tmp_path / "app.log"
    source.write_bytes(
        b"2026-11-29 10:00:01 INFO [main] db.Pool: opened connection 1 to 10.0.0.1\n"
        b"2026-11-29 10:00:02 INFO [main] db.Pool: opened connection 2 to 10.0.0.2\n"
        b"\x00\x01binary\n"
        b'{"prompt": "truncated\n'
        b"2026-11-29 10:00:03 WARN [main] db.Pool: pool exhausted after 30 s\n"
    )
    out = tmp_path / "parsed.csv"
    summary = parse_files([source], out)
    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == COLUMNS
    assert [r["LineId"] for r in rows] == ["1", "2", "3", "4", "5"]
    assert rows[0]["EventId"] == rows[1]["EventId"] != rows[4]["EventId"]
    assert rows[0]["EventTemplate"] == "opened connection <*> to <*>"
    assert rows[2]["EventId"] == rows[3]["EventId"] == MALFORMED_EVENT
    assert summary.lines == 5 and summary.templates == 2
    assert summary.malformed.counts == {"binary": 1, "invalid_json": 1}


def test_parse_rejects_a_missing_file_and_an_empty_one_with_one_sentence(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["parse", str(tmp_path / "nope.log"), "--out", str(tmp_path / "o.csv")])
    assert missing.exit_code == 1  # EXIT_INPUT
    assert missing.output.strip().splitlines() == [
        f"error: the log source {tmp_path / 'nope.log'} does not exist: give a file, a directory or a glob"
    ]
    (tmp_path / "empty.log").write_text("")
    empty = runner.invoke(app, ["parse", str(tmp_path / "empty.log"), "--out", str(tmp_path / "new" / "o.csv")])
    assert empty.exit_code == 1
    assert empty.output.strip().splitlines() == [
        f"error: {tmp_path / 'empty.log'} holds no log lines: nothing to parse"
    ]
    assert not (tmp_path / "new").exists(), "a refused input creates no directory"


def test_a_source_whose_every_line_is_malformed_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    # A compressed or binary file given by mistake: before, `parse` wrote a CSV of `<malformed line>` rows and
    # exited 0 (detect refuses the same input); now one sentence, exit 1, no output and no state.
    (tmp_path / "app.log").write_bytes(b"\x89PNG\r\n\x00\x01\n\xff\xfe\n" * 2)
    out, state = tmp_path / "new" / "o.csv", tmp_path / "state" / "drain3.bin"
    result = CliRunner().invoke(
        app, ["parse", str(tmp_path / "app.log"), "--out", str(out), "--state", str(state.parent)]
    )
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"error: {tmp_path / 'app.log'} holds no log lines (6 malformed skipped: 2 binary, 4 invalid_utf8): "
        "nothing to parse"
    ]
    assert not (tmp_path / "new").exists() and not state.parent.exists(), "a refused input writes nothing"
    (tmp_path / "mixed.log").write_bytes(b"INFO started\n\x00\x01\n")
    mixed = parse_files([tmp_path / "mixed.log"], tmp_path / "mixed.csv")
    assert (mixed.lines, mixed.templates, mixed.malformed.counts) == (2, 1, {"binary": 1}), "one readable line will do"


def test_the_template_state_carries_ids_across_runs(tmp_path: Path) -> None:
    state = tmp_path / "state" / "drain3.bin"
    (tmp_path / "day1.log").write_text("INFO user 1 logged in\nINFO disk 90% full\n")
    (tmp_path / "day2.log").write_text("INFO disk 95% full\nINFO user 7 logged in\nINFO cache cleared\n")
    parse_files([tmp_path / "day1.log"], tmp_path / "day1.csv", state_file=state)
    parse_files([tmp_path / "day2.log"], tmp_path / "day2.csv", state_file=state)
    assert events(tmp_path / "day1.csv") == ["E1", "E2"]
    assert events(tmp_path / "day2.csv") == ["E2", "E1", "E3"]


def test_a_state_file_that_is_a_link_is_saved_where_it_points_and_stays_a_link(tmp_path: Path) -> None:
    # A state kept on a shared volume and linked into place: renamed over, the link became a plain file, and the
    # next run on another machine resumed from the stale state the link still pointed at.
    shared = tmp_path / "shared" / "drain3.bin"
    shared.parent.mkdir()
    link = tmp_path / "drain3.bin"
    link.symlink_to(shared)
    (tmp_path / "day1.log").write_text("INFO user 1 logged in\nINFO disk 90% full\n")
    (tmp_path / "day2.log").write_text("INFO disk 95% full\nINFO cache cleared\n")
    parse_files([tmp_path / "day1.log"], tmp_path / "day1.csv", state_file=link)
    assert link.is_symlink() and shared.stat().st_size > 0
    parse_files([tmp_path / "day2.log"], tmp_path / "day2.csv", state_file=shared)
    assert events(tmp_path / "day2.csv") == ["E2", "E3"], "the state the link saved is the one the next run resumes"
    assert not list(tmp_path.glob(".*.tmp")), "no temporary file is left beside the link"


@pytest.mark.parametrize(
    "content",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00" * 40,  # a user's binary file
        b'{"templates": []}\n',  # JSON of another shape
        b"eJwrSS0uAQAEXQHB",  # base64 of zlib, but not of a template state (`test`)
        b"",
    ],
    ids=["binary", "json", "zlib", "empty"],
)
def test_a_state_file_that_is_not_ours_is_named_so_and_not_deleted_by_advice(tmp_path: Path, content: bytes) -> None:
    # it said "cannot be loaded (…): delete it to start afresh" of any file, a person's own included
    log, state = tmp_path / "day.log", tmp_path / "mine.bin"
    log.write_text("INFO user 1 logged in\n")
    state.write_bytes(content)
    result = CliRunner().invoke(app, ["parse", str(log), "--out", str(tmp_path / "o.csv"), "--state", str(state)])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"error: {state} is not a template state written by vcpilot; pass another --state path "
        "(one that does not exist yet starts afresh)"
    )
    assert state.read_bytes() == content and not (tmp_path / "o.csv").exists()


def test_a_damaged_state_of_ours_says_so(tmp_path: Path) -> None:
    log, state = tmp_path / "day.log", tmp_path / "state.bin"
    log.write_text("INFO user 1 logged in\nINFO disk 90% full\n")
    parse_files([log], tmp_path / "first.csv", state_file=state)
    state.write_bytes(state.read_bytes()[:-40])  # its head is ours; its end is lost
    result = CliRunner().invoke(app, ["parse", str(log), "--out", str(tmp_path / "o.csv"), "--state", str(state)])
    assert result.exit_code == 1
    said = f"error: the template state {state} is damaged and cannot be loaded: delete it to start afresh"
    assert result.stderr.strip() == said


def _crafted(tmp_path: Path, payload: dict, *, as_key: bool = False) -> bytes:
    """A state of ours (its head is our Drain) with `payload` planted inside, as a value or as a `json://` key."""
    state = tmp_path / "real.bin"
    (tmp_path / "real.log").write_text("INFO user 1 logged in\n")
    parse_files([tmp_path / "real.log"], tmp_path / "real.csv", state_file=state)
    document = json.loads(zlib.decompress(base64.b64decode(state.read_bytes())))
    if as_key:
        document["root_node"]["key_to_child_node"]["json://" + json.dumps(payload)] = 1
    else:
        document["root_node"]["planted"] = payload
    return base64.b64encode(zlib.compress(json.dumps(document).encode()))


@pytest.mark.parametrize(
    ("payload", "as_key"),
    [
        ({"py/reduce": [{"py/function": "os.system"}, {"py/tuple": ["touch {marker}"]}]}, False),
        ({"py/reduce": [{"py/function": "os.system"}, {"py/tuple": ["touch {marker}"]}]}, True),
        ({"py/repr": "os/os.system('touch {marker}')"}, False),
        ({"py/object": "subprocess.Popen", "py/newargs": {"py/tuple": [["touch", "{marker}"]]}}, False),
    ],
    ids=["reduce", "reduce-in-a-key", "repr", "object"],
)
def test_a_crafted_state_is_not_loaded_and_runs_nothing(tmp_path: Path, payload: dict, as_key: bool) -> None:
    # jsonpickle builds whatever a state names: a file that begins as ours could run a command as it loaded
    marker = tmp_path / "ran"
    planted = json.loads(json.dumps(payload).replace("{marker}", str(marker)))
    log, state = tmp_path / "day.log", tmp_path / "state.bin"
    log.write_text("INFO user 1 logged in\n")
    state.write_bytes(_crafted(tmp_path, planted, as_key=as_key))
    result = CliRunner().invoke(app, ["parse", str(log), "--out", str(tmp_path / "o.csv"), "--state", str(state)])
    assert result.exit_code == 1 and not marker.exists()
    assert "which no state of ours holds; it is not loaded" in result.stderr
    assert result.stderr.count("\n") == 1


def test_rows_carry_loghubs_structured_columns_content_parameters_and_source(tmp_path: Path) -> None:
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_text("2026-11-29 10:00:01 INFO pool: opened connection 1 to 10.0.0.1:5432\n")
    second.write_text("2026-11-29 10:00:02 INFO pool: opened connection 2 to 10.0.0.2:5432\nerror: disk full\n")
    out = tmp_path / "parsed.csv"
    parse_files([first, second], out)
    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["Source"] for r in rows] == [str(first), str(second), str(second)]
    assert rows[1]["Content"] == "opened connection 2 to 10.0.0.2:5432"
    assert rows[1]["EventTemplate"] == "opened connection <*> to <*>:<*>"
    assert rows[1]["ParameterList"] == "['2', '10.0.0.2', '5432']"
    # A line without a date or time up front is all message: its `error:` is part of its template.
    assert rows[2]["Content"] == rows[2]["EventTemplate"] == "error: disk full"
    assert rows[2]["ParameterList"] == "[]"


def test_a_json_message_with_a_line_break_gets_one_row_and_loses_its_inner_header(tmp_path: Path) -> None:
    # A container runtime's `{"log": "<the program's line>\n"}` stopped the parse (ValueError: not enough values to
    # unpack): the line break split the pending row in two.
    log = tmp_path / "container.jsonl"
    lines = [
        {"log": "2026-12-05 08:49:42,123 ERROR web.app: lookup of 42 failed\n", "stream": "stderr"},
        {"log": "2026-12-05 08:49:43,500 ERROR web.app: lookup of 7 failed\n", "stream": "stderr"},
        {"message": "Traceback (most recent call last):\n  File \"x.py\", line 3\nKeyError: 'a'", "level": "error"},
        {"prompt": "first line\nsecond line", "completion": "ok"},
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "parsed.csv"
    assert parse_files([log], out).lines == 4
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["Content"] for row in rows] == [
        "lookup of 42 failed",
        "lookup of 7 failed",
        "Traceback (most recent call last):   File \"x.py\", line 3 KeyError: 'a'",
        "first line second line",
    ]
    assert rows[0]["EventId"] == rows[1]["EventId"] and rows[0]["EventTemplate"] == "lookup of <*> failed"


@pytest.mark.parametrize("max_clusters", [None, 2])
def test_a_miner_that_remembers_settled_lines_mines_exactly_as_drain_does(max_clusters: int | None) -> None:
    # `Miner.add` skips Drain's tree search for token lists that changed nothing before; templates that change later,
    # clusters created and clusters dropped by the LRU bound must still give what Drain itself gives, line by line.
    touched = [["a", "1", "b"], ["c", "2", "d"], ["a", "1", "b"], ["c", "2", "d"], ["a", "1", "b"], ["e", "3", "f"]] * 2
    lines = (
        touched
        + [  # which of the first two the third cluster drops depends on the last `a 1 b` touching its own
            ["user", "alice", "logged", "in"],
            ["user", "alice", "logged", "in"],
            ["user", "bob", "logged", "in"],  # the template becomes `user <*> logged in`
            ["user", "alice", "logged", "in"],
            ["disk", "<*>", "full"],
            ["cache", "<*>", "miss"],
            ["user", "alice", "logged", "in"],  # its cluster may have been dropped (max_clusters=2)
            ["disk", "<*>", "full"],
            ["disk", "<*>", "full"],
        ]
        * 3
    )
    settings = MinerSettings(max_clusters=max_clusters)
    miner = Miner(settings)
    config = settings.config()
    drain = _ConstantTokenDrain(
        sim_th=config.drain_sim_th,
        depth=config.drain_depth,
        max_children=config.drain_max_children,
        max_clusters=config.drain_max_clusters,
        param_str=MASK,
        parametrize_numeric_tokens=True,
    )
    assert [miner.add(list(tokens)) for tokens in lines] == [
        drain.add_log_message(list(tokens))[0].cluster_id for tokens in lines
    ]
    ours = {c.cluster_id: (c.size, c.log_template_tokens) for c in miner._drain.clusters}
    assert ours == {c.cluster_id: (c.size, c.log_template_tokens) for c in drain.clusters}
    assert list(miner._drain.id_to_cluster) == list(drain.id_to_cluster)  # the same least recently used order


def test_a_dash_reads_standard_input_once_as_it_comes(tmp_path: Path) -> None:
    # `kubectl logs POD | vcpilot logs parse -`: it said "the log source - does not exist"
    import subprocess
    import sys

    lines = "".join(f"2026-12-06 10:00:{i:02d} INFO worker {i} finished step {i * 7}\n" for i in range(40))
    out = tmp_path / "stdin.csv"
    done = subprocess.run(
        [sys.executable, "-m", "components.logs", "parse", "-", "--out", str(out)],
        input=lines,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("40 lines, 1 templates")
    assert set(events(out)) == {"E1"}


def test_a_blank_line_gets_a_row_without_an_event_and_blank_lines_alone_are_refused(tmp_path: Path) -> None:
    # Blank and whitespace lines were mined as an event with an empty template (`E1`, ``), so a file of blank lines
    # parsed as `5 lines, 1 templates` where detect says it holds no log lines.
    source = tmp_path / "app.log"
    source.write_text("2026-11-29 10:00:01 INFO started\n\n   \t\n2026-11-29 10:00:02 INFO stopped\n")
    out = tmp_path / "parsed.csv"
    summary = parse_files([source], out)
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["LineId"], row["EventId"] != "", row["EventTemplate"]) for row in rows] == [
        ("1", True, "started"),
        ("2", False, ""),
        ("3", False, ""),
        ("4", True, "stopped"),
    ]
    assert summary.templates == 2
    (tmp_path / "blank.log").write_text("\n  \n\t\n")
    result = CliRunner().invoke(app, ["parse", str(tmp_path / "blank.log"), "--out", str(tmp_path / "b.csv")])
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {tmp_path / 'blank.log'} holds no log lines: nothing to parse"


def test_logs_that_are_not_utf8_say_to_convert_them(tmp_path):
    # a Latin-1 file said "holds no log lines (2 malformed skipped: 2 invalid_utf8): nothing to parse"
    latin = tmp_path / "latin.log"
    latin.write_bytes("café error 1\nnaïve warn\n".encode("latin-1"))
    result = CliRunner().invoke(app, ["parse", str(latin), "--out", str(tmp_path / "o.csv")])
    assert result.exit_code == 1
    assert "2 invalid_utf8): convert the logs to UTF-8" in result.stderr
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("option", ["--out", "--state"])
def test_an_output_that_is_one_of_the_logs_is_refused_and_the_log_kept(tmp_path: Path, option: str) -> None:
    # `logs parse app.log --out app.log` replaced the log with its CSV, and said it had done well.
    log = tmp_path / "app.log"
    content = "".join(f"2026-12-03 10:00:{i:02d} INFO request {i} done\n" for i in range(20))
    log.write_text(content)
    (tmp_path / "link.log").symlink_to(log)  # the same file by another name counts
    for target in (log, tmp_path / "link.log"):
        args = ["parse", str(tmp_path), "--out", str(tmp_path / "o.csv"), option, str(target)]
        if option == "--out":
            args = ["parse", str(log), "--out", str(target)]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1
        assert result.output.strip() == (
            f"error: {option} {target} is one of the logs being read: writing there would replace it; "
            f"give another {option}"
        )
        assert log.read_text() == content
    assert sorted(path.name for path in tmp_path.iterdir()) == ["app.log", "link.log"]
