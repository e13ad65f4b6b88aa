"""Log formats we were not tuned on, each with a handful of message templates (see `logformat_kit.py`).

The six Loghub sets in ../shared are what the header rule and the masks were measured on; users feed other formats.
Each format here is written from its documented line layout — the other Loghub systems, JSON lines (zap, structlog,
a container runtime's), logfmt, klog, Go's and Python's logging, logback and Spring Boot, nginx's error log, CRI
container logs, syslog RFC 5424, access logs, vLLM and uvicorn, PostgreSQL, Redis, Airflow, Cassandra, Ray,
accelerate/transformers and DeepSpeed — with templates written by hand. No Loghub line is
copied. Run this file to print every format's figures as JSON (docs/components.md has them):

    PYTHONPATH=. .venv/bin/python tests/unit/logs/logformats.py [--lines N] [--seed N]
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # run as a script: the repository's packages

from logformat_kit import Event, LogFormat, generate, hexid, score_format  # noqa: E402

__all__ = ["FORMATS"]


def _ms(clock: datetime) -> str:
    return f"{clock.microsecond // 1000:03d}"


def _syslog_time(clock: datetime) -> str:
    return f"{clock:%b} {clock.day:2d} {clock:%H:%M:%S}"


def _bgl(r: random.Random, t: datetime, e: Event, m: str) -> str:
    card, chip = r.choice("0123456789ABCDEF"), r.choice(["01", "11"])
    node = f"R{r.randint(0, 47):02d}-M{r.randint(0, 1)}-N{card}-C:J{r.randint(2, 17):02d}-U{chip}"
    return f"- {int(t.timestamp())} {t:%Y.%m.%d} {node} {t:%Y-%m-%d-%H.%M.%S.%f} {node} RAS {e.tags[0]} {e.tags[1]} {m}"


def _hpc(r: random.Random, t: datetime, e: Event, m: str) -> str:
    return f"{r.randint(1000, 460000)} node-{r.randint(0, 300)} {e.tags[0]} {e.tags[1]} {int(t.timestamp())} 1 {m}"


def _linux(r: random.Random, t: datetime, e: Event, m: str) -> str:
    program = e.tags[0] if e.tags[0] == "kernel" else f"{e.tags[0]}[{r.randint(100, 32000)}]"
    return f"{_syslog_time(t)} combo {program}: {m}"


def _mac(r: random.Random, t: datetime, e: Event, m: str) -> str:
    host = r.choice(["authorMacBook-Pro", f"calvisitor-10-105-{r.randint(160, 163)}-{r.randint(1, 254)}"])
    process = f"{e.tags[0]}[{e.tags[1] if len(e.tags) > 1 else r.randint(30, 40000)}]"
    if e.tags[0] == "com.apple.xpc.launchd":
        process += f" (com.apple.xpc.launchd.domain.pid.WebContent.{r.randint(1000, 60000)})"
    return f"{_syslog_time(t)} {host} {process}: {m}"


def _android(r: random.Random, t: datetime, e: Event, m: str) -> str:
    pid, tid = r.randint(100, 32000), r.randint(100, 32000)
    return f"{t:%m-%d %H:%M:%S}.{_ms(t)} {pid:5d} {tid:5d} {e.tags[0]} {e.tags[1]}: {m}"


def _windows(r: random.Random, t: datetime, e: Event, m: str) -> str:
    return f"{t:%Y-%m-%d %H:%M:%S}, {e.tags[0]:<22}{e.tags[1]:<7}{m}"


def _healthapp(r: random.Random, t: datetime, e: Event, m: str) -> str:
    # HealthApp pads neither its seconds nor its milliseconds: 20171223-22:16:0:159
    return f"{t:%Y%m%d-%H:%M}:{t.second}:{int(_ms(t))}|{e.tags[0]}|{r.choice(['30002312', '30002313'])}|{m}"


def _openstack(r: random.Random, t: datetime, e: Event, m: str) -> str:
    service, level, logger, request = e.tags
    source = f"{service}.log.1.2017-05-16_13:{r.randint(53, 59):02d}:{r.randint(0, 59):02d}"
    if request == "req":
        request = f"req-{uuid.UUID(int=r.getrandbits(128))} {hexid(r, 32)} {hexid(r, 32)} - - -"
    return f"{source} {t:%Y-%m-%d %H:%M:%S}.{_ms(t)} {r.randint(1000, 30000)} {level} {logger} [{request}] {m}"


def _proxifier(r: random.Random, t: datetime, e: Event, m: str) -> str:
    program = r.choice(["chrome.exe", "chrome.exe *64", "Dropbox.exe", "YodaoDict.exe", "Skype.exe *64"])
    return f"[{t:%m.%d %H:%M:%S}] {program} - {m}"


def _thunderbird(r: random.Random, t: datetime, e: Event, m: str) -> str:
    host = r.choice(["dn228", "dn73", "an395", "bn712", "cn142", "tbird-admin1"])
    program = e.tags[0] if e.tags[0] == "kernel" else f"{e.tags[0]}[{r.randint(100, 32000)}]"
    where = f"local@{host}" if host.startswith("tbird") else f"{host}/{host}"
    return f"- {int(t.timestamp())} {t:%Y.%m.%d} {host} {t:%b} {t.day} {t:%H:%M:%S} {where} {program}: {m}"


def _json_zap(r: random.Random, t: datetime, e: Event, m: str) -> str:
    record = {"level": e.tags[0], "ts": round(t.timestamp(), 3), "caller": e.tags[1], "msg": m}
    record |= {"request_id": hexid(r, 16), "attempt": r.randint(1, 3)}
    return json.dumps(record)


def _json_structlog(r: random.Random, t: datetime, e: Event, m: str) -> str:
    record = {"event": m, "level": e.tags[0], "logger": e.tags[1], "timestamp": t.isoformat().replace("+00:00", "Z")}
    return json.dumps(record)


def _json_docker(r: random.Random, t: datetime, e: Event, m: str) -> str:
    inner = f"{t:%Y-%m-%d %H:%M:%S},{_ms(t)} {e.tags[0]} {e.tags[1]}: {m}\n"
    stamp = t.isoformat().replace("+00:00", "Z")
    return json.dumps({"log": inner, "stream": "stderr" if e.tags[0] == "ERROR" else "stdout", "time": stamp})


def _logfmt(r: random.Random, t: datetime, e: Event, m: str) -> str:
    stamp = t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    time = f'time="{stamp}"' if r.random() < 0.5 else f"time={stamp}"  # logrus quotes it, slog does not
    return f"{time} level={e.tags[0]} {m}"


def _klog(r: random.Random, t: datetime, e: Event, m: str) -> str:
    return f"{e.tags[0]}{t:%m%d %H:%M:%S}.{t.microsecond:06d} {r.randint(1, 99999):7d} {e.tags[1]}] {m}"


def _golog(r: random.Random, t: datetime, e: Event, m: str) -> str:
    return f"{t:%Y/%m/%d %H:%M:%S} {m}"


def _python(r: random.Random, t: datetime, e: Event, m: str) -> str:
    return f"{t:%Y-%m-%d %H:%M:%S},{_ms(t)} {e.tags[0]} {e.tags[1]}: {m}"


def _python_dashes(r: random.Random, t: datetime, e: Event, m: str) -> str:
    return f"{t:%Y-%m-%d %H:%M:%S},{_ms(t)} - {e.tags[1]} - {e.tags[0]} - {m}"


def _logback(r: random.Random, t: datetime, e: Event, m: str) -> str:
    thread = r.choice(["main", "http-nio-8080-exec-3", "pool-2-thread-1", "scheduling-1"])
    return f"{t:%Y-%m-%d %H:%M:%S}.{_ms(t)} [{thread}] {e.tags[0]:<5} {e.tags[1]} - {m}"


def _spring_boot(r: random.Random, t: datetime, e: Event, m: str) -> str:
    stamp = t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    thread = r.choice(["main", "nio-8080-exec-1", "task-2"])
    return f"{stamp} {e.tags[0]:>5} {r.randint(1, 99999)} --- [{thread:>15}] {e.tags[1]:<40} : {m}"


def _nginx_error(r: random.Random, t: datetime, e: Event, m: str) -> str:
    worker = r.randint(7, 99)
    return f"{t:%Y/%m/%d %H:%M:%S} [{e.tags[0]}] {worker}#{worker}: *{r.randint(1, 99999)} {m}"


def _cri(r: random.Random, t: datetime, e: Event, m: str) -> str:
    stamp = t.isoformat(timespec="microseconds").replace("+00:00", "Z")
    inner = m if e.tags[0] == "-" else f"{t:%Y-%m-%d %H:%M:%S},{_ms(t)} {e.tags[0]} {e.tags[1]}: {m}"
    return f"{stamp} {'stderr' if e.tags[0] in ('-', 'ERROR') else 'stdout'} F {inner}"


def _rfc5424(r: random.Random, t: datetime, e: Event, m: str) -> str:
    host = r.choice(["web-1.example.com", "web-2.example.com", "db1", "10.0.3.17"])
    data = r.choice(["-", f'[origin ip="10.0.{r.randint(0, 255)}.{r.randint(1, 254)}" software="rsyslogd"]'])
    stamp = t.isoformat(timespec="microseconds").replace("+00:00", "Z")
    return f"<{e.tags[2]}>1 {stamp} {host} {e.tags[0]} {r.randint(100, 32000)} {e.tags[1]} {data} {m}"


def _access(r: random.Random, t: datetime, e: Event, m: str) -> str:
    ip = ".".join(str(r.randint(1, 254)) for _ in range(4))
    user = r.choice(["-", "-", "alice", "bob"])
    return f"{ip} - {user} [{t:%d/%b/%Y:%H:%M:%S} +0000] {m}"


def _vllm(r: random.Random, t: datetime, e: Event, m: str) -> str:
    process = f"({e.tags[1]} pid={r.randint(1, 999)}) "
    if e.tags[0] == "uvicorn":
        return f"{process}INFO:     {m}"
    return f"{process}{e.tags[0]} {t:%m-%d %H:%M:%S} [{e.tags[2]}] {m}"


def _uvicorn(r: random.Random, t: datetime, e: Event, m: str) -> str:
    return f"{e.tags[0] + ':':<9} {m}"


def _postgres(r: random.Random, t: datetime, e: Event, m: str) -> str:
    # log_line_prefix '%m [%p] ': the time with its zone's name, the pid, then the severity and two spaces
    return f"{t:%Y-%m-%d %H:%M:%S}.{_ms(t)} UTC [{r.randint(100, 65000)}] {e.tags[0]}:  {m}"


def _redis(r: random.Random, t: datetime, e: Event, m: str) -> str:
    # pid:role, day month year time, then the level as a character (. - * #)
    return f"{r.randint(1, 999)}:{r.choice('MSC')} {t:%d %b %Y %H:%M:%S}.{_ms(t)} {e.tags[0]} {m}"


def _airflow(r: random.Random, t: datetime, e: Event, m: str) -> str:
    stamp = f"{t:%Y-%m-%dT%H:%M:%S}.{_ms(t)}+0000"
    return f"[{stamp}] {{{e.tags[1]}:{r.randint(10, 2999)}}} {e.tags[0]} - {m}"


def _cassandra(r: random.Random, t: datetime, e: Event, m: str) -> str:
    thread = r.choice(["main", "CompactionExecutor:3", "MemtableFlushWriter:1", "GossipStage:1"])
    return f"{e.tags[0]:<5} [{thread}] {t:%Y-%m-%d %H:%M:%S},{_ms(t)} {e.tags[1]}:{r.randint(10, 999)} - {m}"


def _ray(r: random.Random, t: datetime, e: Event, m: str) -> str:
    line = f"{t:%Y-%m-%d %H:%M:%S},{_ms(t)}\t{e.tags[0]} {e.tags[1]}:{r.randint(10, 2999)} -- {m}"
    if r.random() < 0.5:  # a worker's line as the driver prints it
        ip = ".".join(str(r.randint(1, 254)) for _ in range(4))
        line = f"(RayTrainWorker pid={r.randint(100, 65000)}, ip={ip}) {line}"
    return line


def _accelerate(r: random.Random, t: datetime, e: Event, m: str) -> str:
    # transformers' and accelerate's examples: "%(asctime)s - %(levelname)s - %(name)s - %(message)s"
    return f"{t:%m/%d/%Y %H:%M:%S} - {e.tags[0]} - {e.tags[1]} - {m}"


def _deepspeed(r: random.Random, t: datetime, e: Event, m: str) -> str:
    return f"[{t:%Y-%m-%d %H:%M:%S},{_ms(t)}] [{e.tags[0]}] [{e.tags[1]}:{r.randint(10, 2999)}:{e.tags[2]}] {m}"


def _events(*rows: tuple[str, ...]) -> tuple[Event, ...]:
    """Events from rows of (template, *tags)."""
    return tuple(Event(row[0], row[1:]) for row in rows)


FORMATS: tuple[LogFormat, ...] = (
    LogFormat(
        "BGL",
        _bgl,
        _events(
            ("instruction cache parity error corrected", "KERNEL", "INFO"),
            ("generating core.${int}", "KERNEL", "INFO"),
            ("${int} double-hummer alignment exceptions", "KERNEL", "INFO"),
            ("data TLB error interrupt", "KERNEL", "FATAL"),
            (
                "ciod: failed to read message prefix on control stream (CioStream socket to ${ip}:${port}",
                "APP",
                "FATAL",
            ),
            ("machine check interrupt (bit=${hex}): L2 dcache unit data parity error", "KERNEL", "FATAL"),
            ("total of ${int} ddr error(s) detected and corrected", "KERNEL", "INFO"),
            ("rts: kernel terminated for reason ${int}", "KERNEL", "FATAL"),
            ("idoproxydb hit ASSERT condition: ASSERT expression=${small} Source line=${int}", "MMCS", "ERROR"),
        ),
    ),
    LogFormat(
        "HPC",
        _hpc,
        _events(
            (
                "Component State Change: Component \\042alt0\\042 is in the unavailable state (HWID=${int})",
                "unix.hw",
                "state_change.unavailable",
            ),
            ("running", "node", "status"),
            ("not responding", "node", "status"),
            ("clusterAddMember  (command ${int})", "action", "start"),
            ("boot  (command ${int}) Error: couldn't connect to console", "action", "error"),
            (
                "NIFF: node node-${int} has detected an available network connection on network ${ip} via "
                "interface alt0",
                "unix.hw",
                "net.niff.up",
            ),
            ("PSU failure ( ambient=${small} )", "node", "psu"),
            ("Temperature (${small}C) exceeds warning threshold", "node", "temperature"),
        ),
    ),
    LogFormat(
        "Linux",
        _linux,
        _events(
            ("authentication failure; logname= uid=0 euid=0 tty=NODEVssh ruser= rhost=${ip}", "sshd(pam_unix)"),
            (
                "authentication failure; logname= uid=0 euid=0 tty=NODEVssh ruser= rhost=${ip}  user=${user}",
                "sshd(pam_unix)",
            ),
            ("check pass; user unknown", "sshd(pam_unix)"),
            ("session opened for user ${user} by (uid=0)", "su(pam_unix)"),
            ("session closed for user ${user}", "su(pam_unix)"),
            ("connection from ${ip} (${host}) at ${ctime}", "ftpd"),
            ("Memory: ${int}k/${int}k available (${int}k kernel code, ${int}k reserved, ${int}k data)", "kernel"),
            ("klogd 1.4.1, log source = /proc/kmsg started.", "kernel"),
            ("ALERT exited abnormally with [${small}]", "logrotate"),
        ),
    ),
    LogFormat(
        "Mac",
        _mac,
        _events(
            (
                "IOThunderboltSwitch<0>(0x0)::listenerCallback - Thunderbolt HPD packet for route = 0x0 "
                "port = ${small} unplug = ${small}",
                "kernel",
                "0",
            ),
            ("ARPT: ${float}: wl0: setup_keepalive: Seq: ${int}, Ack: ${int}, Win size: ${int}", "kernel", "0"),
            ("AppleCamIn::systemWakeCall - messageType = ${hex}", "kernel", "0"),
            ("Service exited with abnormal code: ${small}", "com.apple.xpc.launchd", "1"),
            ("FA||Url||taskID[${int}] dealloc", "QQ"),
            (
                "Libnotify: notify_register_coalesced_registration failed with code ${small} on line ${int}",
                "Google Chrome Helper",
            ),
            ("device_generate_desktop_screenshot: display ${hex}, tile ${small}", "WindowServer"),
            ("CGSConnectionByID: ${small} is not a valid connection ID.", "WindowServer"),
        ),
    ),
    LogFormat(
        "Android",
        _android,
        _events(
            (
                "printFreezingDisplayLogsopening app wtoken = AppWindowToken{${hexid} token=Token{${hexid} "
                "ActivityRecord{${hexid} u0 ${pkg}/.MainActivity t${int}}}}, allDrawn= false",
                "D",
                "WindowManager",
            ),
            (
                'release:lock=${int}, flg=0x0, tag="RILJ_ACK_WL", name=com.android.phone", ws=null, uid=${int}, '
                "pid=${int}",
                "D",
                "PowerManagerService",
            ),
            ("waitForAlarm result :${small}", "V", "AlarmManager"),
            ("Blocking screen on until initial contents have been drawn.", "I", "DisplayPowerController"),
            ("Animating brightness: target=${int}, rate=${float}", "D", "DisplayPowerController"),
            ("Start proc ${int}:${pkg}/u0a${int} for service ${pkg}/.Service", "I", "ActivityManager"),
            ("uid=${int}(${pkg}) expire ${small} lines", "I", "chatty"),
            ("Skipping service ${pkg}: package is stopped", "W", "ActivityManager"),
        ),
    ),
    LogFormat(
        "Windows",
        _windows,
        _events(
            ("Loaded Servicing Stack v${ver} with Core: ${winpath}", "Info", "CBS"),
            ("Starting TrustedInstaller initialization.", "Info", "CBS"),
            ("Ending TrustedInstaller initialization.", "Info", "CBS"),
            ("Session: ${int}_${int} initialized by client WindowsUpdateAgent.", "Info", "CBS"),
            (
                "Read out cached package applicability for package: Package_for_KB${int}~31bf3856ad364e35~amd64~~"
                "${ver}, ApplicableState: ${small}, CurrentState:${small}",
                "Info",
                "CBS",
            ),
            (
                "${int}@2016/9/${small}:${small}:${small}:${small}.${int} WcpInitialize (wcp.dll version 0.0.0.6) "
                "called (stack @${hex} @${hex} @${hex})",
                "Info",
                "CSI",
            ),
            ("Failed to internally open package. [HRESULT = ${hex} - CBS_E_INVALID_PACKAGE]", "Error", "CBS"),
            ("Unrecognized packageExtended attribute.", "Warning", "CBS"),
        ),
    ),
    LogFormat(
        "HealthApp",
        _healthapp,
        _events(
            ("onStandStepChanged ${int}", "Step_LSC"),
            ("onExtend:${big} ${small} ${small} ${small}", "Step_LSC"),
            ("setTodayTotalDetailSteps=${big}##${int}##${int}##${int}##${int}##${big}", "Step_SPUtils"),
            ("onReceive action: android.intent.action.SCREEN_ON", "Step_StandReportReceiver"),
            ("onReceive action: android.intent.action.SCREEN_OFF", "Step_StandReportReceiver"),
            ("flush sensor data", "Step_LSC"),
            ("calculateCaloriesWithCache totalCalories=${int}", "Step_ExtSDM"),
            ("saveHealthDetailData() size = ${small}", "HiH_HiHealthDataInsertStore"),
        ),
    ),
    LogFormat(
        "OpenStack",
        _openstack,
        _events(
            (
                '${ip} "GET /v2/${hex32}/servers/detail HTTP/1.1" status: 200 len: ${int} time: ${float}',
                "nova-api",
                "INFO",
                "nova.osapi_compute.wsgi.server",
                "req",
            ),
            (
                '${ip} "POST /v2/${hex32}/os-server-external-events HTTP/1.1" status: 200 len: ${int} time: ${float}',
                "nova-api",
                "INFO",
                "nova.osapi_compute.wsgi.server",
                "req",
            ),
            ("[instance: ${uuid}] VM Started (Lifecycle Event)", "nova-compute", "INFO", "nova.compute.manager", "-"),
            ("[instance: ${uuid}] VM Paused (Lifecycle Event)", "nova-compute", "INFO", "nova.compute.manager", "-"),
            ("image ${uuid} at (${path}): checking", "nova-compute", "INFO", "nova.virt.libvirt.imagecache", "req"),
            (
                "[instance: ${uuid}] Total memory: ${int} MB, used: ${float} MB",
                "nova-compute",
                "INFO",
                "nova.compute.claims",
                "req",
            ),
            ("Unknown base file: ${path}", "nova-compute", "WARNING", "nova.virt.libvirt.imagecache", "req"),
            (
                "Final resource view: name=cp-1.slowvm1.tcloud-pg0.utah.cloudlab.us phys_ram=${int}MB "
                "used_ram=${int}MB phys_disk=${int}GB used_disk=${int}GB total_vcpus=${small} used_vcpus=${small} "
                "pci_stats=[]",
                "nova-compute",
                "INFO",
                "nova.compute.resource_tracker",
                "req",
            ),
        ),
    ),
    LogFormat(
        "Proxifier",
        _proxifier,
        _events(
            ("${host}:${port} close, ${int} bytes sent, ${int} bytes received, lifetime <1 sec",),
            (
                "${host}:${port} close, ${int} bytes (${float} KB) sent, ${int} bytes (${float} MB) received, "
                "lifetime ${small}:${small}",
            ),
            ("${host}:${port} open through proxy proxy.cse.cuhk.edu.hk:5070 HTTPS",),
            ("${host}:${port} open through proxy socks.cse.cuhk.edu.hk:5070 SOCKS5",),
            (
                "${host}:${port} error : Could not connect through proxy proxy.cse.cuhk.edu.hk:5070 - Proxy server "
                "cannot establish a connection with the target, status code ${small}",
            ),
            ("${host}:${port} error : A connection request was canceled before the completion.",),
        ),
    ),
    LogFormat(
        "Thunderbird",
        _thunderbird,
        _events(
            ("session opened for user ${user} by (uid=0)", "crond(pam_unix)"),
            ("session closed for user ${user}", "crond(pam_unix)"),
            ("(${user}) CMD (run-parts /etc/cron.hourly)", "crond"),
            ("Accepted publickey for ${user} from ${ip} port ${port} ssh2", "sshd"),
            ("Losing some ticks... checking if CPU frequency changed.", "kernel"),
            ("warning: unable to look up public/pickup: No such file or directory", "postfix/postdrop"),
            ("synchronized to ${ip}, stratum ${small}", "ntpd"),
            ("ib_sm_sweep.c:${int}: ******************** topology change ****************", "kernel"),
        ),
    ),
    LogFormat(
        "JSON-zap",
        _json_zap,
        _events(
            ("request served in ${dur}", "info", "server/handler.go:88"),
            ("cache miss for key user:${int}", "debug", "cache/lru.go:142"),
            ("upstream ${ip}:${port} refused the connection", "error", "proxy/dial.go:51"),
            ("retrying in ${dur} after attempt ${small}", "warn", "proxy/retry.go:30"),
            ("loaded ${int} rows from ${path}", "info", "store/load.go:77"),
            ("user ${user} logged in", "info", "auth/session.go:19"),
        ),
    ),
    LogFormat(
        "JSON-structlog",
        _json_structlog,
        _events(
            ("worker ${int} picked job ${uuid}", "info", "app.worker"),
            ("job ${uuid} finished in ${float} s", "info", "app.worker"),
            ("job ${uuid} failed: timeout after ${small} s", "error", "app.worker"),
            ("connected to redis at ${ip}:${port}", "info", "app.queue"),
            ("queue depth is ${int}", "warning", "app.queue"),
            ("user ${user} changed plan to premium", "info", "app.billing"),
        ),
    ),
    LogFormat(
        "JSON-docker",
        _json_docker,
        _events(
            ("GET ${route} answered 200 in ${float} ms", "INFO", "web.access"),
            ("POST ${route} answered 201 in ${float} ms", "INFO", "web.access"),
            ("database pool exhausted (size ${small}), waiting", "WARNING", "db.pool"),
            ("Traceback (most recent call last): KeyError: '${hexid}'", "ERROR", "web.app"),
            ("scheduled task sync_inventory took ${float} s", "INFO", "tasks"),
            ("token for user ${user} expires in ${int} s", "DEBUG", "auth"),
        ),
    ),
    LogFormat(
        "logfmt",
        _logfmt,
        _events(
            ('msg="request served" method=GET path=${route} status=200 duration=${dur}', "info"),
            ('msg="request served" method=POST path=${route} status=201 duration=${dur}', "info"),
            ('msg="cache refreshed" entries=${int} took=${dur}', "debug"),
            ('msg="dial failed" addr=${ip}:${port} err="connection refused"', "error"),
            ('msg="slow query" table=orders rows=${int} took=${dur}', "warn"),
            ('msg="user signed in" user=${user} session=${hex32}', "info"),
        ),
    ),
    LogFormat(
        "klog",
        _klog,
        _events(
            ("Successfully assigned default/web-${hexid}-x2kqj to node-${small}", "I", "scheduler.go:412"),
            (
                '"Observed pod startup duration" pod="default/web-${hexid}" podStartSLOduration=${float}',
                "I",
                "pod_startup_latency_tracker.go:102",
            ),
            (
                "Starting reflector *v1.Pod (${small}s) from k8s.io/client-go/informers/factory.go:${int}",
                "I",
                "reflector.go:289",
            ),
            ("attempting to acquire leader lease kube-system/kube-scheduler...", "I", "leaderelection.go:250"),
            ("successfully acquired lease kube-system/kube-scheduler", "I", "leaderelection.go:260"),
            (
                '"Error syncing pod, skipping" err="back-off ${small}m0s restarting failed container" pod="default/web-'
                '${hexid}" podUID="${uuid}"',
                "E",
                "pod_workers.go:1298",
            ),
            (
                'Failed to watch *v1.Node: failed to list *v1.Node: Get "https://${ip}:6443/api/v1/nodes": dial tcp '
                "${ip}:6443: connect: connection refused",
                "W",
                "reflector.go:535",
            ),
        ),
    ),
    LogFormat(
        "Go-log",
        _golog,
        _events(
            ("http: TLS handshake error from ${ip}:${port}: EOF",),
            ("http: panic serving ${ip}:${port}: runtime error: index out of range [${small}] with length ${small}",),
            ("listening on :${port}",),
            ("dial tcp ${ip}:${port}: connect: connection refused",),
            ("open ${path}: no such file or directory",),
            ("processed ${int} events in ${dur}",),
        ),
    ),
    LogFormat(
        "Python",
        _python,
        _events(
            ("Starting new HTTPS connection (${small}): api.example.com:443", "DEBUG", "urllib3.connectionpool"),
            ('https://api.example.com:443 "GET ${route} HTTP/1.1" 200 ${int}', "DEBUG", "urllib3.connectionpool"),
            (
                "Retrying (Retry(total=${small}, connect=None, read=None)) after connection broken",
                "WARNING",
                "urllib3.connectionpool",
            ),
            ("Task ${uuid} succeeded in ${float}s", "INFO", "celery.app.trace"),
            ("Received task: tasks.send_email[${uuid}]", "INFO", "celery.worker.strategy"),
            ("Connection to ${ip} lost: timed out", "ERROR", "app.db"),
        ),
    ),
    LogFormat(
        "Python-dashes",
        _python_dashes,
        _events(
            ("Epoch ${small} step ${int} loss ${float}", "INFO", "trainer"),
            ("Saved checkpoint to ${path}", "INFO", "trainer.checkpoint"),
            ("Gradient overflow, skipping step ${int}", "WARNING", "trainer.amp"),
            ("CUDA out of memory: tried to allocate ${size}", "ERROR", "trainer"),
            ("Loaded ${int} samples from ${path}", "INFO", "data"),
        ),
    ),
    LogFormat(
        "logback",
        _logback,
        _events(
            ("Started Application in ${float} seconds (process running for ${float})", "INFO", "c.e.shop.Application"),
            ("HikariPool-1 - Start completed.", "INFO", "com.zaxxer.hikari.HikariDataSource"),
            ("Order ${int} placed by customer ${int}", "INFO", "c.e.shop.OrderService"),
            ("Payment for order ${int} declined: insufficient funds", "WARN", "c.e.shop.PaymentService"),
            ("Connection is not available, request timed out after ${int}ms.", "ERROR", "c.e.shop.Repository"),
        ),
    ),
    LogFormat(
        "SpringBoot",
        _spring_boot,
        _events(
            (
                "Tomcat started on port ${port} (http) with context path '/'",
                "INFO",
                "o.s.b.w.embedded.tomcat.TomcatWebServer",
            ),
            ("Completed initialization in ${small} ms", "INFO", "o.s.web.servlet.DispatcherServlet"),
            ("Cache miss for product ${int}", "DEBUG", "c.e.shop.ProductCache"),
            (
                "Resolved [org.springframework.web.HttpRequestMethodNotSupportedException: Request method 'PUT' is not "
                "supported]",
                "WARN",
                "o.s.w.s.m.s.DefaultHandlerExceptionResolver",
            ),
        ),
    ),
    LogFormat(
        "nginx-error",
        _nginx_error,
        _events(
            (
                'open() "${path}" failed (2: No such file or directory), client: ${ip}, server: shop.example.com, '
                'request: "GET /favicon.ico HTTP/1.1"',
                "error",
            ),
            (
                "upstream timed out (110: Connection timed out) while reading response header from upstream, client: "
                "${ip}, server: shop.example.com",
                "error",
            ),
            ("client ${ip} closed keepalive connection", "info"),
            ('limiting requests, excess: ${float} by zone "api", client: ${ip}', "warn"),
        ),
    ),
    LogFormat(
        "CRI-containerd",
        _cri,
        _events(
            ("Loaded ${int} items into the cache", "INFO", "app.cache"),
            ("request ${uuid} took ${float} ms", "INFO", "app.http"),
            ("Database connection lost: timeout after ${small} s", "ERROR", "app.db"),
            ("panic: runtime error: invalid memory address or nil pointer dereference", "-"),
            ("goroutine ${int} [running]:", "-"),
        ),
    ),
    LogFormat(
        "syslog-RFC5424",
        _rfc5424,
        _events(
            ("'su root' failed for ${user} on /dev/pts/${small}", "su", "ID47", "34"),
            ("Accepted password for ${user} from ${ip} port ${port} ssh2", "sshd", "-", "38"),
            ("Disconnected from ${ip} port ${port}", "sshd", "-", "38"),
            ("Started Session ${int} of user ${user}.", "systemd", "-", "30"),
            ("Out of memory: Killed process ${pid} (python3)", "kernel", "-", "3"),
            ("(${user}) CMD (/usr/local/bin/backup.sh)", "CRON", "-", "78"),
        ),
    ),
    LogFormat(
        "access-log",
        _access,
        _events(  # the path is the request's variable, as the client's address and the sizes are
            ('"GET ${route} HTTP/1.1" ${status} ${int} "-" "${agent}"',),
            ('"POST ${route} HTTP/1.1" ${status} ${int} "-" "${agent}"',),
            ('"DELETE ${route} HTTP/1.1" ${status} ${int} "-" "${agent}"',),
            ('"GET /static/app.${hexid}.js HTTP/2.0" 304 0 "https://shop.example.com/" "${agent}"',),
            ('"HEAD ${route} HTTP/1.1" ${status} 0 "-" "${agent}"',),
        ),
    ),
    LogFormat(
        "vLLM",
        _vllm,
        _events(
            ("Added request chatcmpl-${hex32}.", "INFO", "APIServer", "async_llm.py:431"),
            (
                "Engine 000: Avg prompt throughput: ${float} tokens/s, Avg generation throughput: ${float} tokens/s, "
                "Running: ${small} reqs, Waiting: ${small} reqs, GPU KV cache usage: ${float}%, Prefix cache hit rate: "
                "${float}%",
                "INFO",
                "EngineCore_DP0",
                "loggers.py:118",
            ),
            ('${ip}:${port} - "POST /v1/chat/completions HTTP/1.1" ${status} OK', "uvicorn", "APIServer"),
            ("Aborted request chatcmpl-${hex32}.", "INFO", "APIServer", "async_llm.py:431"),
            (
                "Received request chatcmpl-${hex32}: prompt: '${user}', params: SamplingParams(n=1, "
                "temperature=${float})",
                "INFO",
                "APIServer",
                "logger.py:39",
            ),
            (
                "Sequence group ${int} is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV "
                "cache space.",
                "WARNING",
                "EngineCore_DP0",
                "scheduler.py:1592",
            ),
        ),
    ),
    LogFormat(
        "PostgreSQL",
        _postgres,
        _events(
            ("statement: SELECT * FROM items WHERE id = ${int}", "LOG"),
            ("checkpoint starting: time", "LOG"),
            ("checkpoint complete: wrote ${int} buffers (${float}%); ${small} WAL file(s) added", "LOG"),
            ('relation "items_${small}" does not exist at character ${int}', "ERROR"),
            ("could not receive data from client: Connection reset by peer", "LOG"),
            ('password authentication failed for user "${user}"', "FATAL"),
            ("duration: ${float} ms", "LOG"),
        ),
    ),
    LogFormat(
        "Redis",
        _redis,
        _events(
            ("Ready to accept connections tcp", "*"),
            ("${int} changes in ${int} seconds. Saving...", "*"),
            ("Background saving started by pid ${pid}", "*"),
            ("Background saving terminated with success", "*"),
            ("DB saved on disk", "*"),
            ("Connection with replica ${ip}:${port} lost.", "#"),
        ),
    ),
    LogFormat(
        "Airflow",
        _airflow,
        _events(
            (
                "Marking task as SUCCESS. dag_id=etl_${small}, task_id=load, run_id=scheduled__${int}",
                "INFO",
                "taskinstance.py",
            ),
            (
                "Dependencies all met for dep_context=non-requeueable deps ti=<TaskInstance: etl.load ${int}>",
                "INFO",
                "taskinstance.py",
            ),
            ("Started process ${pid} to run task", "INFO", "standard_task_runner.py"),
            ("Task exited with return code ${small}", "INFO", "local_task_job_runner.py"),
            ("Task failed with exception", "ERROR", "taskinstance.py"),
            ("Monitoring task ${hexid} for state changes", "INFO", "scheduler_job_runner.py"),
        ),
    ),
    LogFormat(
        "Cassandra",
        _cassandra,
        _events(
            ("Starting listening for CQL clients on /${ip}:${port} (unencrypted)...", "INFO", "Server.java"),
            (
                "Compacted (${hexid}) ${small} sstables to [${path}] to level=0. ${size} to ${size}",
                "INFO",
                "CompactionTask.java",
            ),
            ("Writing Memtable-items@${int}(${size} serialized bytes, ${int} ops)", "INFO", "Memtable.java"),
            ("InetAddress /${ip} is now DOWN", "INFO", "Gossiper.java"),
            ("Not marking nodes down due to local pause of ${int}ns > 5000000000ns", "WARN", "FailureDetector.java"),
        ),
    ),
    LogFormat(
        "Ray",
        _ray,
        _events(
            ("Connecting to existing Ray cluster at address: ${ip}:${port}...", "INFO", "worker.py"),
            ("Started a local Ray instance.", "INFO", "worker.py"),
            ("Epoch ${small} finished, loss=${float}", "INFO", "train_loop.py"),
            ("Checkpoint successfully created at: Checkpoint(filesystem=local, path=${path})", "INFO", "session.py"),
            ("Worker ${hexid} died unexpectedly; restarting the trial", "WARNING", "trial_runner.py"),
        ),
    ),
    LogFormat(
        "accelerate",
        _accelerate,
        _events(
            ("Distributed environment: MULTI_GPU  Backend: nccl", "INFO", "__main__"),
            ("Num processes: ${small}", "INFO", "__main__"),
            ("***** Running training *****", "INFO", "__main__"),
            ("Loading checkpoint shards took ${float}s", "INFO", "transformers.modeling_utils"),
            ("Saving model checkpoint to ${path}", "INFO", "transformers.trainer"),
            (
                "Gradient overflow. Skipping step, loss scaler ${small} reducing loss scale to ${float}",
                "WARNING",
                "accelerate.accelerator",
            ),
        ),
    ),
    LogFormat(
        "DeepSpeed",
        _deepspeed,
        _events(
            ("DeepSpeed info: version=${ver}, git-hash=unknown, git-branch=unknown", "INFO", "engine.py", "__init__"),
            ("Using client Optimizer as basic optimizer", "INFO", "engine.py", "_configure_optimizer"),
            ("step=${int}, skipped=${small}, lr=[${float}], mom=[(0.9, 0.999)]", "INFO", "logging.py", "log_dist"),
            ("[Torch] Checkpoint global_step${int} is ready now!", "INFO", "torch_checkpoint_engine.py", "commit"),
            ("OVERFLOW! Rank 0 Skipping step. Attempted loss scale: ${int}", "INFO", "loss_scaler.py", "update_scale"),
        ),
    ),
    LogFormat(
        "uvicorn",
        _uvicorn,
        _events(
            ('${ip}:${port} - "POST ${route} HTTP/1.1" ${status} OK', "INFO"),
            ('${ip}:${port} - "GET ${route} HTTP/1.1" ${status} OK', "INFO"),
            ("Started server process [${pid}]", "INFO"),
            ("Waiting for application startup.", "INFO"),
            ("Application startup complete.", "INFO"),
            ("Invalid HTTP request received.", "WARNING"),
            ("Exception in ASGI application", "ERROR"),
        ),
    ),
)
"""Every format we check, by the name it is reported under."""


def main(argv: Sequence[str]) -> None:
    """Print every format's figures as JSON."""
    count = int(argv[argv.index("--lines") + 1]) if "--lines" in argv else 300
    seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 1
    figures = {}
    with tempfile.TemporaryDirectory(prefix="vcpilot-logformats-") as tmp:
        for fmt in FORMATS:
            work = Path(tmp) / fmt.name
            work.mkdir()
            try:
                figures[fmt.name] = score_format(generate(fmt, count, seed), work).as_dict()
            except Exception as err:  # a format that breaks the parse is a figure too: it scores nothing
                figures[fmt.name] = {"error": f"{type(err).__name__}: {err}"}
    keys = ("message_exact", "grouping_accuracy", "f1_grouping")
    average = {key: round(sum(f.get(key, 0.0) for f in figures.values()) / len(figures), 4) for key in keys}
    print(json.dumps({"lines_per_format": count, "seed": seed, "formats": figures, "average": average}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
