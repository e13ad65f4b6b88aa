"""The header rule on formats it was not tuned on: each line's message starts where its format's does.

Every case here failed before the rule read headers token by token (a leftover header, or message words eaten).
"""

from __future__ import annotations

import time

import pytest

from components.logs.header import level_of, split_header


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (  # BGL: a node between two times, then upper-case fields up to the level
            "- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS KERNEL "
            "INFO instruction cache parity error corrected",
            "instruction cache parity error corrected",
        ),
        (  # Thunderbird: a host between the dates, `host/host prog(x)[pid]:`
            "- 1131566461 2005.11.09 dn228 Nov 9 12:01:01 dn228/dn228 crond(pam_unix)[2915]: session closed for "
            "user root",
            "session closed for user root",
        ),
        ("Jun 14 15:16:01 combo kernel: klogd 1.4.1, log source = /proc/kmsg started.", "klogd 1.4.1, log source ="),
        (
            "Jul  1 09:00:55 authorMacBook-Pro Google Chrome Helper[231]: Libnotify: notify_register failed with "
            "code 9",
            "Libnotify: notify_register failed with code 9",
        ),
        (
            "Jul  1 09:01:05 calvisitor-10-105-160-95 com.apple.xpc.launchd[1] (com.apple.WebContent.35433): "
            "Service exited with abnormal code: 1",
            "Service exited with abnormal code: 1",
        ),
        ("03-17 16:13:38.811  1702  2395 D WindowManager: printFreezingDisplayLogs", "printFreezingDisplayLogs"),
        (
            "2016-09-28 04:30:30, Info                  CBS    Loaded Servicing Stack v6.1.7601.23505 with Core",
            "Loaded Servicing Stack v6.1.7601.23505 with Core",
        ),
        ("20171223-22:15:29:606|Step_LSC|30002312|onStandStepChanged 3579", "onStandStepChanged 3579"),
        # HealthApp writes its seconds unpadded: `22:16:0:159`; before, no header was found in such a line
        ("20171223-22:16:0:159|Step_ExtSDM|30002312|calculateCaloriesWithCache", "calculateCaloriesWithCache"),
        ("2026-12-05 8:4:2 INFO app: started", "started"),
        # an epoch as the only time, a field after it: HPC (a signed flag), squid's access log
        (
            "134681 node-246 unix.hw state_change.unavailable 1077804742 -1 Component State Change: Component",
            "Component State Change",
        ),
        ("1286536309.586    921 192.168.0.68 TCP_MISS/200 507 POST http://example.test/", "192.168.0.68 TCP_MISS"),
        # PostgreSQL: a zone by its name, a level with its colon and two spaces
        ("2026-12-05 08:49:42.123 UTC [1234] LOG:  statement: SELECT 1", "statement: SELECT 1"),
        ('2026-12-05 08:49:42.123 CET [1234] ERROR:  relation "x" does not exist', 'relation "x"'),
        # where the line was logged: a source file and line, bare, braced or bracketed with its function
        ("INFO  [main] 2026-12-05 08:49:42,123 CassandraDaemon.java:123 - Starting listening", "Starting listening"),
        ("[2026-12-05T08:49:42.123+0000] {taskinstance.py:1234} INFO - Marking task as SUCCESS", "Marking task"),
        ("(RayTrainWorker pid=12, ip=10.0.0.1) 2026-12-05 08:49:42,123\tINFO worker.py:1234 -- Started", "Started"),
        ("[2026-12-05 08:49:42,123] [INFO] [checkpoint.py:500:commit] [Torch] Checkpoint is ready", "[Torch] Check"),
        ("2026/12/05 08:49:42 main.go:12: listening on :8080", "listening on :8080"),
        # Python's `%(asctime)s - %(levelname)s - %(name)s - %(message)s` (transformers, accelerate)
        ("12/05/2026 08:49:42 - INFO - __main__ - Distributed environment: MULTI_GPU", "Distributed environment"),
        # Redis: pid:role, the day before the month, a level of one character
        ("1:M 05 Dec 2026 08:49:42.123 * 261 changes in 75 seconds. Saving...", "261 changes"),
        (
            "nova-api.log.1.2017-05-16_13:53:08 2017-05-16 00:00:00.008 25746 INFO nova.osapi_compute.wsgi.server "
            '[req-38101a0b-2096-447d-96ea-a692162415ae 113d3a99c3da401f 54fdadf6f69b4ff1 - - -] 10.11.10.1 "GET /v2"',
            '10.11.10.1 "GET /v2"',
        ),
        ("[10.30 16:49:06] chrome.exe *64 - proxy.cse.cuhk.edu.hk:5070 close, 0 bytes sent", "proxy.cse.cuhk.edu.hk:"),
        ('time="2026-12-05T08:49:42Z" level=info msg="request served" status=200', 'msg="request served" status=200'),
        ("I1205 08:49:42.123456   12345 controller.go:123] Starting: controller", "Starting: controller"),
        ("2026-12-05 08:49:42,123 - app.worker - INFO - Epoch 3 - loss 0.5", "Epoch 3 - loss 0.5"),
        ("2026-12-05 08:49:42.123 [main] INFO  c.e.shop.Application - Started in 3.2 s", "Started in 3.2 s"),
        (
            "2026-12-05T08:49:42.123Z  INFO 4242 --- [           main] o.s.b.w.e.tomcat.TomcatWebServer         : "
            "Tomcat started on port 8080",
            "Tomcat started on port 8080",
        ),
        ("2026/12/05 08:49:42 [error] 31#31: *7 open() failed (2: No such file)", "open() failed (2: No such file)"),
        ("2026-12-05T08:49:42.123456789Z stderr F panic: runtime error", "panic: runtime error"),
        ("2026-12-05T08:49:42.1Z stdout F 2026-12-05 08:49:42,100 INFO app.db: connected", "connected"),
        (
            '<34>1 2026-12-05T08:49:42Z web-1 su 1234 ID47 [origin ip="10.0.0.1"] failed for lonvick',
            "failed for lonvick",
        ),
        ("<38>1 2026-12-05T08:49:42.1Z db1 sshd 1234 - - Accepted password for bob", "Accepted password for bob"),
        (
            '10.0.0.1 - alice [05/Dec/2026:08:49:42 +0000] "GET /api/v1/items/42 HTTP/1.1" 200 512',
            '"GET /api/v1/items/42',
        ),
        ("(APIServer pid=7) INFO 12-05 08:49:42 [async_llm.py:431] Added request chatcmpl-1a2b.", "Added request"),
        ('INFO:     10.0.0.1:5678 - "POST /v1/completions HTTP/1.1" 200 OK', '10.0.0.1:5678 - "POST'),
        ('(APIServer pid=7) INFO:     10.0.0.1:5678 - "POST /v1/chat/completions HTTP/1.1" 200 OK', "10.0.0.1:5678 - "),
    ],
)
def test_the_header_of_a_format_we_were_not_tuned_on_is_cut_where_its_message_starts(line: str, message: str) -> None:
    header, rest = split_header(line)
    assert header + rest == line
    assert rest.startswith(message), (header, rest)
    assert not header or not rest.startswith(" ")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        # Go's log package writes no component: `http:` and `open /path:` are the message's own words.
        ("2026/12/05 08:49:42 http: TLS handshake error from 10.0.0.1:5678: EOF", "http: TLS handshake error"),
        ("2026/12/05 08:49:42 open /etc/app/config.yaml: no such file or directory", "open /etc/app/config.yaml:"),
        ("2026/12/05 08:49:42 connection refused: retrying in 5s", "connection refused: retrying"),
        # BGL's level ends its header: `ciod:` begins the message.
        (
            "- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.6 R02-M1 RAS APP FATAL ciod: failed",
            "ciod:",
        ),
        # A padded column ends a fixed-width header: `Session:` begins the message.
        ("2016-09-28 04:30:31, Info                  CBS    Session: 30546173_1 initialized", "Session: 30546173_1"),
        # After Zookeeper's ` - ` separator, and a line without a time, as before.
        ("2015-07-29 19:04:12,394 - WARN  [QuorumPeer:Learner@233] - Unexpected Exception:", "Unexpected Exception:"),
        ("error: Received disconnect from 10.0.0.1: 11: Bye Bye", "error: Received disconnect"),
        # A ten-digit number is a time in a header only where a header field follows it.
        ("1365301360 double-hummer alignment exceptions", "1365301360 double-hummer"),
        ("Invalid user 1234567890 from 10.0.0.1", "Invalid user 1234567890"),
        ("order 1234567890 shipped to 3 addresses", "order 1234567890"),
        # A line that is header fields to its end keeps its last one as its message (HPC's one-word messages).
        ("2286759 node-1 node status 1061219795 -1 running", "running"),
        ("131 node-4 action start 1077 1 warning", "131 node-4"),  # no time: all message, as before
        # A word that begins as a month or a day is no date (`Mar…`, `Mon…`); an upper-case word before ` - ` no logger.
        ("2026-12-05 08:49:42 INFO Monitoring started", "Monitoring started"),
        ("2026-12-05 08:49:42 INFO Marking done", "Marking done"),
        (
            "2015-07-30 15:21:24,592 - INFO  [QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:Follower@63] - FOLLOWING - X",
            "FOLLOW",
        ),
        ("[10.30 16:49:06] chrome.exe - proxy.example.test:5070 open through proxy", "proxy.example.test:5070"),
    ],
)
def test_words_of_a_message_that_look_like_a_header_stay_in_it(line: str, message: str) -> None:
    assert split_header(line)[1].startswith(message)


@pytest.mark.parametrize(
    ("line", "level"),
    [
        ("E1205 08:49:42.123456   12345 pod_workers.go:1298] Error syncing pod", "ERROR"),
        ("03-17 16:13:38.811  1702  2395 E ActivityManager: ANR in com.android.phone", "ERROR"),
        ("2016-09-28 04:30:30, Error                 CBS    Failed to internally open package.", "ERROR"),
        ("- 1117838570 2005.06.03 R02-M1 2005-06-03-15.42.50.675872 R02-M1 RAS KERNEL FATAL data TLB error", "FATAL"),
        ("2026-12-05T08:49:42.123456789Z stdout F all good here", None),  # CRI's F says the line is whole
        ("ERROR:    Exception in ASGI application", "ERROR"),
        ('time=2026-12-05T08:49:42Z level=warn msg="slow query"', "WARN"),
    ],
)
def test_the_level_of_these_formats_is_read_from_their_header(line: str, level: str | None) -> None:
    assert level_of(*split_header(line)) == level


@pytest.mark.parametrize(
    ("line", "level"),
    [
        # logfmt says its level as `level=…` wherever it stands: each of these was no level, so no error counted.
        ('level=error msg="db down" user=3', "ERROR"),  # no time: no header at all
        ('ts=2026-12-05T08:49:42.123Z caller=main.go:12 level=error msg="db down"', "ERROR"),  # go-kit, Prometheus
        ('t=2026-12-05T08:49:42+0000 lvl=eror logger=sqlstore msg="query failed"', "ERROR"),  # log15 (Grafana)
        ('t=2026-12-05T08:49:42+0000 lvl=dbug logger=sqlstore msg="query"', "DEBUG"),
        ("2026-12-05 08:49:42 INFO billing: level=error is a word here", "INFO"),  # the header's level comes first
    ],
)
def test_a_logfmt_level_is_read_wherever_the_line_has_it(line: str, level: str) -> None:
    assert level_of(*split_header(line)) == level


_CLF = '10.0.0.7 - - [03/Dec/2026:10:00:01 +0000] "POST /v1/completions HTTP/1.1" {} 512 "-" "python-httpx/0.27"'


@pytest.mark.parametrize(
    ("line", "level"),
    [
        # An access line's 5xx is the server failing a request: these read as no level (or INFO), so a proxy's or
        # a model server's rising 5xx share was no error at all, and `logs detect` saw no change.
        (_CLF.format(502), "ERROR"),  # nginx / Apache combined
        (_CLF.format(200), None),
        (_CLF.format(404), None),  # the client's error, not the server's
        # 503 bytes, not a status
        ('10.0.0.7 - - [03/Dec/2026:10:00:01 +0000] "GET /health HTTP/1.1" 200 503', None),
        # uvicorn
        ('INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error', "ERROR"),
        # Envoy
        ('[2026-12-03T10:00:01.310Z] "POST /v1/completions HTTP/2" 503 UF 154 0 226 - "10.0.35.28" "-"', "ERROR"),
        (
            "2026-12-03 10:00:01.123 2931 INFO nova.osapi_compute.wsgi.server [req-1 - - - - -] 10.11.10.1 "
            '"GET /v2/servers/detail HTTP/1.1" status: 500 len: 1893 time: 0.2477829',
            "ERROR",
        ),  # OpenStack's WSGI server
        ('time=2026-12-03T10:00:01Z level=info msg="request done" status=503 path=/v1/completions', "ERROR"),  # logfmt
        ('time=2026-12-03T10:00:01Z level=info msg="request done" status=200 bytes=503', "INFO"),
    ],
)
def test_an_access_lines_5xx_status_is_an_error_at_any_level(line: str, level: str | None) -> None:
    assert level_of(*split_header(line)) == level


@pytest.mark.parametrize(
    ("line", "message"),
    [
        # a 12-hour clock's half stayed in the message, so a morning's and an afternoon's events were two templates
        ("Dec 03, 2026 10:00:00 AM org.apache.catalina.startup.Catalina start", "org.apache.catalina.startup."),
        ("Dec 3, 2026 1:00:00 PM org.apache.catalina.startup.Catalina start", "org.apache.catalina.startup."),
        ("03-Dec-2026 10:00:00.123 INFO [main] org.apache.catalina.startup.Catalina.start ok", "org.apache.catalina."),
    ],
)
def test_a_twelve_hour_clocks_half_is_header(line: str, message: str) -> None:
    assert split_header(line)[1].startswith(message)


@pytest.mark.parametrize(
    ("line", "level"),
    [
        # A syslog priority's severity is the line's level where nothing else names one: these were no level.
        ("<11>1 2026-12-03T10:00:00.123Z host app 123 - - disk failure", "ERR"),  # 11 = user.err
        ("<10>Dec  3 10:00:00 host app[1]: disk failure", "CRIT"),  # RFC 3164, 10 = user.crit
        ("<14>1 2026-12-03T10:00:00.123Z host app 123 - - all good", "INFO"),
        ("<14>1 2026-12-03T10:00:00.123Z host app 123 - - ERROR lookup failed", "ERROR"),  # the program's own word
        # HAProxy's HTTP log: its timers, then the status, the request line last.
        (
            "10.0.0.1:5000 [03/Dec/2026:10:00:00.123] fe be/srv1 0/0/1/-1/2 503 212 - - SC-- 1/1/0/0/0 0/0 "
            '"POST /v1/completions HTTP/1.1"',
            "ERROR",
        ),
        (
            "10.0.0.1:5000 [03/Dec/2026:10:00:00.123] fe be/srv1 0/0/1/4/5 200 512 - - ---- 1/1/0/0/0 0/0 "
            '"GET / HTTP/1.1"',
            None,
        ),
        # .NET's console logger writes `fail:` and `crit:` where others write ERROR and CRITICAL.
        ("fail: Microsoft.AspNetCore.Server.Kestrel[13]", "ERROR"),
        ("2026-12-03 10:00:00 crit: Microsoft.Hosting.Lifetime[6]", "CRITICAL"),
        # Its `warn:` and `info:` after a time (`TimestampFormat` set) were no level.
        ("2026-12-03 10:00:00.123 warn: Microsoft.AspNetCore.Mvc[1]", "WARN"),
        ("10:00:00 info: Microsoft.Hosting.Lifetime[14]", "INFO"),
        ("fail to see why: a plain message", None),
    ],
)
def test_syslog_priorities_haproxy_and_dotnet_levels(line: str, level: str | None) -> None:
    assert level_of(*split_header(line)) == level


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('ts=2026-12-05T08:49:42.123Z caller=main.go:12 level=info msg="Server is ready"', 'msg="Server is ready"'),
        ("2026-12-05T08:49:42+05 INFO service started", "service started"),  # ISO 8601's offset in hours alone
        # ISO 8601's basic format dates a header too: these were all message, their level unread
        ("20261203T120000Z INFO [main] worker: started 3 jobs", "started 3 jobs"),
        ("20261203T120000.123+0100 ERROR app.db - connection lost", "connection lost"),
    ],
)
def test_these_headers_end_where_their_message_starts(line: str, message: str) -> None:
    assert split_header(line)[1] == message


def test_a_header_with_a_long_field_is_split_in_linear_time() -> None:
    # A header that is fields to its end keeps its last one as its message; the search for it started at every
    # character of a long field and read to the field's end: 50,000 characters took a minute, 1 MiB hours.
    line = "2026-12-05 08:49:42 [" + "a" * 50_000 + "] 12"
    started = time.perf_counter()
    assert split_header(line)[1] == "12"
    assert time.perf_counter() - started < 1
