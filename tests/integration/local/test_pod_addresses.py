"""Each LocalCluster pod has an address of its own, as pods in network namespaces of their own do.

Two runs on one machine once load-tested at the same time: both servers bound 0.0.0.0:8000, and the second
either failed or its client talked to the first run's model. Now each pod's `status.podIP` is an address of
127.0.0.0/8 of its own, `VC_<TASK>_HOSTS` lists those addresses, and `$(NAME)` in args expands as the kubelet
expands it, so a server that binds `$(POD_IP)` shares its port with nobody.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from net_kit import free_port
from vcjob_factory import vcjob, vcjob_task

from components.volcano.cluster_local import LocalCluster
from components.volcano.localpods import expand

pytestmark = pytest.mark.integration

# Binds the address and port it is given, says so in a file, waits until the other job's server has bound the
# same port too, then answers one connection with its pod's name.
SERVER = """
import os, pathlib, socket, sys, time
host, port, marks = sys.argv[1], int(sys.argv[2]), pathlib.Path(sys.argv[3])
sock = socket.socket()
sock.bind((host, port))
sock.listen()
(marks / os.environ["VCPILOT_JOB_NAME"]).write_text(host)
while len(list(marks.iterdir())) < 2:
    time.sleep(0.05)
conn, _ = sock.accept()
conn.sendall(os.environ["VCPILOT_POD_NAME"].encode())
conn.close()
"""
# Connects to the first server of VC_SERVER_HOSTS (retrying until it listens) and prints what it answers.
CLIENT = """
import os, socket, sys, time
host, port = os.environ["VC_SERVER_HOSTS"].split(",")[0], int(sys.argv[1])
for _ in range(400):
    try:
        with socket.create_connection((host, port), timeout=2) as conn:
            print(host, conn.recv(100).decode(), flush=True)
            break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit("no server at " + host)
"""


def gang(name: str, port: int, marks: Path) -> dict:
    """A job of a server and a client, found through the svc plugin; done when the client is."""
    server = vcjob_task("server", command=["python", "-c", SERVER, "$(POD_IP)", str(port), str(marks)])
    server["template"]["spec"]["containers"][0]["env"] = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    ]
    client = vcjob_task(
        "client",
        command=["python", "-c", CLIENT, str(port)],
        policies=[{"event": "TaskCompleted", "action": "CompleteJob"}],
    )
    manifest = vcjob(name, tasks=[server, client])
    manifest["spec"]["plugins"] = {"svc": [], "env": []}
    return manifest


def test_two_jobs_servers_bind_the_same_port_at_once_and_each_client_reaches_its_own(tmp_path):
    marks, port = tmp_path / "bound", free_port()
    marks.mkdir()
    cluster = LocalCluster(tmp_path / "home")
    try:
        for name in ("run-a", "run-b"):
            cluster.submit(gang(name, port, marks))
        deadline = time.monotonic() + 90
        while {cluster.get(n).phase for n in ("run-a", "run-b")} - {"Completed", "Failed"}:
            assert time.monotonic() < deadline, [(n, cluster.get(n).phase) for n in ("run-a", "run-b")]
            time.sleep(0.2)
        logs = {name: dict(cluster.logs(name)) for name in ("run-a", "run-b")}
        assert all(cluster.get(n).phase == "Completed" for n in ("run-a", "run-b")), logs
        addresses = {name: (marks / name).read_text() for name in ("run-a", "run-b")}
        assert len(set(addresses.values())) == 2 and all(a.startswith("127.") for a in addresses.values())
        assert not any(a.startswith("127.0.0.") for a in addresses.values()), "127.0.0.x is the machine's own"
        for name, address in addresses.items():
            (client_log,) = [text for pod, text in logs[name].items() if "-client-" in pod]
            assert client_log.split() == [address, f"{name}-server-0"], logs[name]
    finally:
        for name in ("run-a", "run-b"):
            cluster.delete(name, missing_ok=True)
        cluster.close()


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("--host=$(POD_IP)", "--host=127.9.8.7"),
        ("$(POD_IP):$(PORT)", "127.9.8.7:8000"),
        ("$$(POD_IP)", "$(POD_IP)"),  # escaped
        ("echo $$ $HOME $(HOME)", "echo $ $HOME $(HOME)"),  # $$ is a dollar; only the container's variables
        ("$(POD_IP", "$(POD_IP"),
        ("no reference", "no reference"),
    ],
)
def test_references_expand_as_the_kubelet_expands_them(text, expanded):
    assert expand(text, {"POD_IP": "127.9.8.7", "PORT": "8000"}) == expanded
