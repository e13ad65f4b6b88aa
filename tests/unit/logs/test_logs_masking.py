"""One generic header rule and one set of masks turn lines of every format into the same kind of message."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from components.logs.masking import (
    LineTokenizer,
    level_of,
    mask_variables,
    message_tokens,
    shown_tokens,
    split_header,
)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 for block blk_38 terminating",
            "PacketResponder 1 for block blk_38 terminating",
        ),
        (
            "[Sun Dec 04 04:47:44 2005] [notice] workerEnv.init() ok /etc/x.properties",
            "workerEnv.init() ok /etc/x.properties",
        ),
        (
            "Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user webmaster from 173.234.31.186",
            "Invalid user webmaster from 173.234.31.186",
        ),
        (
            "2015-07-29 17:41:44,747 - INFO  [QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:FastLeaderElection@774] - "
            "Notification time out: 3200",
            "Notification time out: 3200",
        ),
        (
            "2015-10-18 18:01:47,978 INFO [main] org.apache.hadoop.mapreduce.v2.app.MRAppMaster: Created MRAppMaster",
            "Created MRAppMaster",
        ),
        (
            "17/06/09 20:10:40 INFO spark.SecurityManager: Changing view acls to: yarn,curi",
            "Changing view acls to: yarn,curi",
        ),
        ("2026-11-29T02:00:01Z ERROR request 1 served in 21 ms", "request 1 served in 21 ms"),
        ("just a message without any header", "just a message without any header"),
    ],
)
def test_the_header_of_every_format_is_stripped_by_one_rule(line: str, message: str) -> None:
    assert split_header(line)[1] == message


def test_a_word_with_a_colon_after_a_dash_separator_stays_in_the_message() -> None:
    line = "2015-07-29 19:04:12,394 - WARN  [QuorumPeer:Learner@233] - Unexpected Exception:"
    assert split_header(line)[1] == "Unexpected Exception:"


@pytest.mark.parametrize(
    ("line", "level"),
    [
        ("2026-11-29 ERROR db: connection lost", "ERROR"),
        ("[Sun Dec 04 04:47:44 2005] [error] mod_jk child in error state 6", "ERROR"),
        ("081109 203615 148 INFO dfs.DataNode: Receiving block", "INFO"),
        ("worker crashed: Traceback (most recent call last)", "ERROR"),
        ("all good", None),
    ],
)
def test_levels_come_from_the_header_or_an_error_word(line: str, level: str | None) -> None:
    header, message = split_header(line)
    assert level_of(header, message) == level


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("from 10.251.73.220:50010 to 10.1.2.3", "from <*>:<*> to <*>"),
        ("id 3f2504e0-4f89-11d3-9a0c-0305e82c3301 done", "id <*> done"),
        ("addr 0x7ffd1a2b and deadbeef42", "addr <*> and <*>"),
        ("wrote /var/log/app/out.log", "wrote <*>"),
        ("at 2026-11-29T02:00:01.123Z", "at <*>"),
        ("took 12.5 ms, retry -3", "took <*> ms, retry <*>"),
        ("ssh2 and user_1x stay words", "ssh2 and user_1x stay words"),
        # Formats we were not tuned on: each of these stayed a constant word before.
        ("took 12ms, then 1.5s; 22m0s left", "took <*>ms, then <*>s; <*>m0s left"),  # a unit is kept, as Loghub writes
        ("Memory: 1703k/8k available (9915KB)", "Memory: <*>k/<*>k available (<*>KB)"),
        ("generating core.529", "generating core.<*>"),
        ("klogd 1.4.1 loaded v6.1.7601.23505 for curl/8.5.0", "klogd <*> loaded <*> for curl/<*>"),
        ("jetty-6.1.26 and python3.11 stay", "jetty-6.1.26 and python3.11 stay"),  # a name's own version
        (r"Core: C:\Windows\winsxs\amd64_6.1\cbscore.dll", "Core: <*>"),
    ],
)
def test_variables_are_masked(text: str, masked: str) -> None:
    assert mask_variables(text) == masked


def test_a_date_written_in_words_inside_a_message_is_one_variable() -> None:
    # Linux's ftpd: each line named its own weekday and month, and every few days made a template of their own.
    first = message_tokens("connection from 10.0.0.1 (db) at Sun Jul 10 03:55:15 2005")
    second = message_tokens("connection from 10.0.0.2 (db) at Wed Aug  3 13:05:59 2005")
    assert first == second == ["connection", "from", "<*>", "(db)", "at", "<*>"]
    assert message_tokens("since Jul 10 03:55:15 up") == ["since", "<*>", "up"]


def test_a_byte_count_restated_in_bigger_units_is_left_out() -> None:
    # Proxifier adds `(2.77 KB)` only above 1 KB, dd always: kept, a small and a big transfer were two templates
    # (Proxifier's close lines were ten, by which of its two counts passed 1 KB).
    small = message_tokens("close, 0 bytes sent, 512 bytes received, lifetime 00:01")
    big = message_tokens("close, 2838 bytes (2.77 KB) sent, 4194304 bytes (4.00 MB) received, lifetime 00:01")
    assert small == big == ["close,", "<*>", "bytes", "sent,", "<*>", "bytes", "received,", "lifetime", "<*>"]
    assert message_tokens("1048576 bytes (1.0 MB, 1.0 MiB) copied") == ["<*>", "bytes", "copied"]
    # Only a count's restatement: brackets of other words, or after no count, stay.
    assert message_tokens("stored 5 blocks (estimated size 5.2 KB)")[3:] == ["(estimated", "size", "<*>", "KB)"]
    assert message_tokens("cache (2 KB) full") == ["cache", "<*>", "KB)", "full"]


def test_a_token_holding_a_variable_becomes_one_wildcard_and_lists_collapse() -> None:
    assert message_tokens("ask 10.0.0.1:50010 to delete blk_1 blk_-2 blk_3") == ["ask", "<*>", "to", "delete", "<*>"]
    assert message_tokens("ask 10.0.0.1:50010 to delete blk_4") == ["ask", "<*>", "to", "delete", "<*>"]
    # Two different variables side by side are two variables.
    assert message_tokens("peer [1.2.3.4] 10.0.0.1:80 failed") == ["peer", "<*>", "<*>", "failed"]


def test_a_message_whose_every_word_holds_a_variable_is_matched_by_what_stays_of_its_words() -> None:
    # Matched as wholes, each would be one `<*>`, and every such message one event (Android's key=value lists).
    assert message_tokens("cancelNotification,index:3") == ["cancelNotification,index:<*>"]
    assert message_tokens("ready=true,policy=3,wakefulness=1") == ["ready=true,policy=<*>,wakefulness=<*>"]
    assert message_tokens("onExtend:1514038530000 14 0 4") == ["onExtend:<*>", "<*>"]
    assert message_tokens("12 34") == ["<*>"]  # nothing stays: a variable still


def test_long_lines_are_cut_for_matching() -> None:
    assert len(message_tokens("word " * 500, max_tokens=100)) == 100


def test_a_line_without_a_date_or_time_up_front_is_all_message() -> None:
    # Loghub's benchmark feeds the Content column alone: a leading `word:`, level or number is the message's own.
    for message in ("error: Received disconnect from 1.2.3.4", "Times: total = 3, boot = 1", "3 more failures"):
        assert split_header(message) == ("", message)


def test_a_template_shows_what_is_constant_inside_a_token() -> None:
    tokens, shown = shown_tokens("Receiving blk_-16 src: /10.0.0.1:5410")
    assert tokens == ["Receiving", "<*>", "src:", "<*>"]
    assert shown == ["Receiving", "blk_<*>", "src:", "/<*>:<*>"]


def test_a_line_without_a_timestamp_still_gives_its_leading_level() -> None:
    header, message = split_header("WARN disk 91% full")
    assert (header, message) == ("", "WARN disk 91% full")
    assert level_of(header, message) == "WARN"


def _uncached(line: str, max_tokens: int = 100) -> tuple[str, list[str], list[str]]:
    message = split_header(line)[1]
    return (message, *shown_tokens(message, max_tokens))


@pytest.mark.parametrize(
    "lines",
    [
        # A digit kept in a word, in a word with a variable, and in lists that collapse or not by the digits alone.
        ["Dec 10 06:55:46 LabSZ sshd[24200]: ssh2 login", "Dec 11 07:15:06 LabSZ sshd[14201]: ssh5 login"],
        ["17/06/09 20:10:40 INFO storage: rdd_2_0 rdd_2_1 put", "17/06/09 20:10:41 INFO storage: rdd_2_0 rdd_3_1 put"],
        ["17/06/09 20:10:40 INFO storage: put rdd_2_0 rdd_2_1", "17/06/09 20:10:41 INFO storage: put rdd_2_0 rdd_3_1"],
        ["2026-11-29 10:00:01 INFO blk_1 blk_2 blk_3 gone", "2026-11-29 10:00:02 INFO blk_4 gone"],
        ["addr 0x7ffd1a2b free", "addr 1x7ffd1a2b free", "addr 5x7ffd1a2b free"],  # hex's `0x` names a digit
        # A literal `<*>` word could equal the next word's masked form for one line of a shape and not for another.
        ["a <*>y1 2026-11-29T02:00:01y1 b", "a <*>y7 2026-11-29T02:00:01y3 b"],
        ["12 Ünïcödé ٣٤ 56 /a1/b2", "78 Ünïcödé ٣٤ 90 /a3/b4"],  # Arabic-Indic digits are not ASCII ones
        # A count's restatement is dropped by its digits' shape alone.
        [
            "[10.30 16:49:07] a.exe - h:5070 close, 1300 bytes (1.3 KB) sent",
            "[10.30 16:49:08] a.exe - h:5070 close, 9 bytes sent",
        ],
        # Every word holds a variable, one keeps a digit as well: matched by what stays of the words.
        ["2026-11-29 10:00:01 INFO x: ssh2=5,port=22 id=7", "2026-11-29 10:00:01 INFO x: ssh5=5,port=22 id=8"],
        ["2026-11-29 10:00:01 INFO x: idx:3,v2=4", "2026-11-29 10:00:01 INFO x: idx:9,v7=1"],
    ],
)
def test_a_tokenizer_remembers_a_shape_without_changing_any_result(lines: list[str]) -> None:
    tokenizer, short = LineTokenizer(), LineTokenizer(max_tokens=3)
    for line in lines + lines:
        assert tokenizer.tokens(line) == _uncached(line)
        assert short.tokens(line) == _uncached(line, max_tokens=3)


def test_a_tokenizer_remembers_only_its_most_recent_shapes() -> None:
    tokenizer = LineTokenizer(shapes=2)
    for n in range(10):
        assert tokenizer.tokens(f"{'w ' * n}12 done") == _uncached(f"{'w ' * n}12 done")
    assert len(tokenizer._shapes) == 2


def test_a_tokenizer_stops_remembering_where_lines_never_share_a_shape() -> None:
    tokenizer = LineTokenizer()
    words = ["".join(random.Random(n).choices("ghijkl", k=8)) for n in range(5000)]  # a new shape every line
    for word in words:
        line = f"2026-11-29 10:00:01 INFO x: user {word} left after 12 s"
        assert tokenizer.tokens(line) == _uncached(line)
    assert len(tokenizer._shapes) == 0  # paused after the first 4096 lines, its cache let go


def test_a_tokenizer_agrees_with_the_uncached_path_on_every_loghub_line(shared_dir: Path) -> None:
    rng, tokenizer = random.Random(5), LineTokenizer()
    for path in sorted((shared_dir / "datasets" / "loghub").glob("*/*_2k.log")):
        for line in path.read_text(encoding="utf-8").splitlines():
            redrawn = re.sub(r"\d", lambda _: rng.choice("0123456789"), line)  # the same shape, other digits
            assert tokenizer.tokens(line) == _uncached(line)
            assert tokenizer.tokens(redrawn) == _uncached(redrawn)


def test_a_signed_hex_offset_is_hex_not_a_number_with_a_unit() -> None:
    # Every frame of a Go stack trace ends so: `+0x1d` read as 0 with the unit `x1d`, its template `<*>x1d`.
    assert shown_tokens("/app/main.go:12 +0x1d")[1] == ["<*>:<*>", "+<*>"]
    assert mask_variables("offset -0x10 after 12ms") == "offset -<*> after <*>ms"


def test_a_tokenizer_does_not_remember_the_shape_of_a_long_line() -> None:
    # A shape is as long as its line: 8192 remembered lines of 1 MiB would hold 8 GiB.
    tokenizer = LineTokenizer()
    for n in range(3):
        line = f"2026-11-29 10:00:0{n} INFO payload " + "ab" * 5000
        assert tokenizer.tokens(line) == _uncached(line)
    assert len(tokenizer._shapes) == 0
