"""Times read from log lines in the formats services and the Loghub systems write, and windows as people write them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from components.errors import InputError
from components.logs.interval import parse_window
from components.logs.timestamps import TimeReader, format_time

REFERENCE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("2026-11-03T12:00:01Z INFO served", "2026-11-03T12:00:01Z"),
        ("2026-11-03T12:00:01.5+01:00 INFO served", "2026-11-03T11:00:01Z"),
        ("2026-11-03 12:00:01 -0500 WARN slow", "2026-11-03T17:00:01Z"),
        ("2026-11-03T12:00Z up", "2026-11-03T12:00:00Z"),
        ("2015-10-18 18:01:47,978 INFO [main] org.apache.hadoop.MRAppMaster: Created", "2015-10-18T18:01:47Z"),
        (
            "2015-07-29 17:41:44,747 - INFO  [QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181] - Notification",
            "2015-07-29T17:41:44Z",
        ),
        ("Nov  3 12:00:01 host sshd[1]: Accepted", "2026-11-03T12:00:01Z"),
        ("Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user webmaster", "2026-12-10T06:55:46Z"),
        ('10.0.0.1 - - [03/Nov/2026:12:00:01 +0100] "GET / HTTP/1.1" 200 512', "2026-11-03T11:00:01Z"),
        ("[Sun Dec 04 04:47:44 2005] [notice] workerEnv.init() ok", "2005-12-04T04:47:44Z"),
        ("081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1", "2008-11-09T20:36:15Z"),
        ("17/06/09 20:10:40 INFO executor.CoarseGrainedExecutorBackend: Registered", "2017-06-09T20:10:40Z"),
        ("- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.675872 RAS KERNEL", "2005-06-03T15:42:50Z"),
        ("134681 node-246 unix.hw state_change.unavailable 1077804742 1 Component", "2004-02-26T14:12:22Z"),
        ("20171223-22:15:29:606|Step_LSC|30002312|onStandStepChanged 3579", "2017-12-23T22:15:29Z"),
        ("20171223-22:16:0:159|Step_ExtSDM|30002312|calculateCaloriesWithCache", "2017-12-23T22:16:00Z"),  # unpadded
        ("1:M 05 Dec 2026 08:49:42.123 * Ready to accept connections", "2026-12-05T08:49:42Z"),  # Redis
        ("Sat, 05 Dec 2026 08:49:42 +0100 mail sent", "2026-12-05T07:49:42Z"),  # RFC 2822
        ("12/05/2026 08:49:42 - INFO - __main__ - x", "2026-12-05T08:49:42Z"),  # the month first (transformers)
        ("25/12/2026 08:49:42 INFO x", "2026-12-25T08:49:42Z"),  # the day first, told by its being over 12
        # an IP address's `72.89.10` reads as a clock; the time after it was cut to its minutes
        ("(RayTrainWorker pid=3, ip=172.89.109.183) 2026-12-05 08:49:47,735\tINFO x", "2026-12-05T08:49:47Z"),
        ("03-17 16:13:38.811  1702  2395 D WindowManager: printFreezingDisplayLogs", "2026-03-17T16:13:38Z"),
        ("2026/11/03 12:00:01 listening on :8080", "2026-11-03T12:00:01Z"),
        # klog and vLLM's own lines: no time was read from either
        ("I1103 12:00:01.123456   12345 controller.go:123] Starting", "2026-11-03T12:00:01Z"),
        ("(APIServer pid=7) INFO 11-03 12:00:01 [async_llm.py:431] Added request chatcmpl-1.", "2026-11-03T12:00:01Z"),
        ("WARNING 11-03 12:00:01 scheduler.py:1592] Sequence group 3 is preempted", "2026-11-03T12:00:01Z"),
        # a shape that is no date (month 13) is passed over for the next time on the line
        ("2026-13-45 10:00:00 then 2026-11-01 10:00:00", "2026-11-01T10:00:00Z"),
        # ISO 8601's basic format: no time was read from it
        ("20261203T120000Z INFO served", "2026-12-03T12:00:00Z"),
        ("20261203T120000.123+0100 WARN slow", "2026-12-03T11:00:00Z"),
        ("20261203T120000,5-05 ERROR down", "2026-12-03T17:00:00Z"),
        ("INFO 20261203T235959 worker 3 started", "2026-12-03T23:59:59Z"),
        ("ts=20261203T120000Z level=info msg=ok", "2026-12-03T12:00:00Z"),
        # no time was read from these: Tomcat's and PHP's day-month-year, java.util.logging's 12-hour clock, dots
        ("03-Dec-2026 10:00:00.123 INFO [main] org.apache.catalina.startup.Catalina.start", "2026-12-03T10:00:00Z"),
        ("[03-Dec-2026 10:00:00 UTC] PHP Fatal error:  Uncaught Exception: boom", "2026-12-03T10:00:00Z"),
        ("Dec 03, 2026 10:00:00 AM org.apache.catalina.startup.Catalina start", "2026-12-03T10:00:00Z"),
        ("Dec 3, 2026 1:00:00 PM com.example.Main main", "2026-12-03T13:00:00Z"),
        ("Dec 3, 2026 12:30:00 AM com.example.Main main", "2026-12-03T00:30:00Z"),  # 12 AM is midnight
        ("Dec 3, 2026 12:30:00 PM com.example.Main main", "2026-12-03T12:30:00Z"),
        ("2026.12.03 10:00:00 INFO started", "2026-12-03T10:00:00Z"),
        ("03.12.2026 10:00:00 INFO gestartet", "2026-12-03T10:00:00Z"),  # the day first, as most of Europe writes
    ],
)
def test_common_formats_are_read_without_configuration(line: str, expected: str) -> None:
    seconds = TimeReader(REFERENCE).line(line)
    assert seconds is not None and format_time(seconds) == expected


@pytest.mark.parametrize(
    "line",
    [
        "    at com.example.Handler.run(Handler.java:42)",
        "Traceback (most recent call last):",
        "served 12.50 in 10:30",
        # what the basic format's shape is not: eight digits alone, its minutes without seconds, an hour 25, an id
        "build 20261203 done",
        "snapshot 20261203T1200 taken",
        "at 20261203T250000Z",
        "id 120261203T120000Z",
        "v1.20261203T120000Z",
        "Dec 3, 2026 13:00:00 PM no such hour",
    ],
)
def test_a_line_without_a_time_has_none(line: str) -> None:
    assert TimeReader(REFERENCE).line(line) is None


def test_a_syslog_time_in_december_read_in_january_is_last_year() -> None:
    seconds = TimeReader(datetime(2027, 1, 2, tzinfo=UTC)).line("Dec 31 23:59:59 host cron[1]: done")
    assert seconds is not None and format_time(seconds) == "2026-12-31T23:59:59Z"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1793966401, "2026-11-06T12:00:01Z"),
        (1793966401123, "2026-11-06T12:00:01Z"),
        ("1793966401.5", "2026-11-06T12:00:01Z"),
        ("2026-11-06T13:00:01+01:00", "2026-11-06T12:00:01Z"),
    ],
)
def test_json_fields_hold_epoch_seconds_or_milliseconds_or_text(value: str | int, expected: str) -> None:
    seconds = TimeReader(REFERENCE).value(value)
    assert seconds is not None and format_time(seconds) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-01T00:00/2026-11-02T00:00", "2026-11-01T00:00:00Z/2026-11-02T00:00:00Z"),
        ("2026-11-01/P1D", "2026-11-01T00:00:00Z/2026-11-02T00:00:00Z"),
        ("PT6H/2026-11-02T00:00", "2026-11-01T18:00:00Z/2026-11-02T00:00:00Z"),
        ("2026-11-01T00:00+01:00/PT1H30M", "2026-10-31T23:00:00Z/2026-11-01T00:30:00Z"),
        ("now-48h/now-24h", "2026-11-28T12:00:00Z/2026-11-29T12:00:00Z"),
        ("24h", "2026-11-29T12:00:00Z/2026-11-30T12:00:00Z"),
        ("1d12h", "2026-11-29T00:00:00Z/2026-11-30T12:00:00Z"),
    ],
)
def test_windows_read_as_iso_intervals_or_relative_to_now(text: str, expected: str) -> None:
    assert str(parse_window(text, REFERENCE)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("yesterday", "--current-window 'yesterday' is not a time window: write START/END"),
        ("2026-11-02/2026-11-01", "--current-window '2026-11-02/2026-11-01' ends before it starts"),
        ("0h", "--current-window '0h' is empty: it ends when it starts"),
        ("P1D/PT1H", "--current-window 'P1D/PT1H' is not a time window"),
        ("9999-12-31/P2D", "--current-window '9999-12-31/P2D' is not a time window"),
    ],
)
def test_a_bad_window_is_one_sentence(text: str, message: str) -> None:
    with pytest.raises(InputError, match="^" + message.replace("(", r"\(").replace(")", r"\)")) as caught:
        parse_window(text, REFERENCE, option="--current-window")
    assert "\n" not in str(caught.value)
