"""Argo's synchronization on one machine: the mutexes and semaphores of a workflow or a template, as file locks.

Argo's controller holds them (workflow/sync): a template's locks from the moment its node would start until it
is fulfilled, retries and children included; a workflow's for the whole run, its exit handler included. All of a
node's locks are taken together or none is, and one that is not free leaves the node (or the workflow) Pending
with Argo's message, `Waiting for <lock> lock. Lock status: 0/<limit>`, until it is.

Here a lock is `flock` on a file under `VCPILOT_HOME/locks`, one file per semaphore slot, so that the runs of
one machine — each its own runner process — share a lock name as the workflows of one cluster do, and a runner
that dies lets go of its locks with its process (the files are opened close-on-exec: no pod holds one).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pipelines.local.workflow import WorkflowError

# How often a waiting node tries its locks again (Argo's controller is told when a lock is released; a file lock
# cannot tell, so it is polled).
POLL_S = 0.2


@dataclass(frozen=True)
class Lock:
    """One lock as Argo names it (`<namespace>/Mutex/<name>`, `<namespace>/ConfigMap/<name>/<key>`) and its size."""

    key: str
    limit: int


def locks_of(sync: Any, namespace: str, where: str, limit_of: Callable[[str, str], int] | None = None) -> list[Lock]:
    """The locks `sync` asks for, in Argo's order (semaphores, then mutexes); WorkflowError for a bad one.

    `where` names the field in sentences: `spec.synchronization`, `template 'x' synchronization`.

    `limit_of(configmap, key)` is a semaphore's size; without it (a check before the run) every size is 1.
    """
    if not isinstance(sync, Mapping):
        raise WorkflowError(f"{where} is not a mapping of semaphores and mutexes.")
    found: list[Lock] = []
    for kind in ("semaphores", "mutexes"):
        items = sync.get(kind) or []
        if not isinstance(items, list) or not all(isinstance(item, Mapping) for item in items):
            raise WorkflowError(f"{where}.{kind} is not a list of mappings.")
        for index, item in enumerate(items):
            at = f"{where}.{kind}[{index}]"
            if item.get("database"):
                raise WorkflowError(f"{at} is kept in Argo's database, which the local runner has not: remove it.")
            space = str(item.get("namespace") or namespace)
            if kind == "mutexes":
                name = item.get("name")
                if not isinstance(name, str) or not name:
                    raise WorkflowError(f"{at} has no name: name the mutex.")
                found.append(Lock(f"{space}/Mutex/{name}", 1))
                continue
            ref = item.get("configMapKeyRef")
            if not isinstance(ref, Mapping) or not ref.get("name") or not ref.get("key"):
                raise WorkflowError(f"{at} has no configMapKeyRef with a name and a key: its size is read there.")
            cm, key = str(ref["name"]), str(ref["key"])
            found.append(Lock(f"{space}/ConfigMap/{cm}/{key}", limit_of(cm, key) if limit_of else 1))
    if len({lock.key for lock in found}) < len(found):
        raise WorkflowError(f"{where} names a lock twice (Argo: duplicate synchronization item found).")
    return found


@contextlib.contextmanager
def holding(
    directory: Path, locks: list[Lock], waiting: Callable[[str], None], give_up: Callable[[], bool]
) -> Iterator[bool]:
    """Hold all of `locks` for the block; True once held, False when `give_up()` ended the wait first.

    While one is not free, `waiting(message)` is told Argo's message (again only when it changes).
    """
    if not locks:
        yield True
        return
    directory.mkdir(parents=True, exist_ok=True)
    told = ""
    while True:
        held, blocked = _take(directory, locks)
        if blocked is None:
            break
        message = f"Waiting for {blocked.key} lock. Lock status: 0/{blocked.limit}"
        if message != told:
            waiting(message)
            told = message
        if give_up():
            yield False
            return
        time.sleep(POLL_S)
    try:
        yield True
    finally:
        for fd in held:
            os.close(fd)


def _take(directory: Path, locks: list[Lock]) -> tuple[list[int], Lock | None]:
    """Every lock's free slot, held; or none held and the first lock with no free slot."""
    held: list[int] = []
    for lock in locks:
        fd = next((fd for slot in range(max(lock.limit, 0)) if (fd := _slot(directory, lock, slot)) is not None), None)
        if fd is None:
            for taken in held:
                os.close(taken)
            return [], lock
        held.append(fd)
    return held, None


def _slot(directory: Path, lock: Lock, slot: int) -> int | None:
    name = quote(lock.key, safe="")
    if len(name) > 200:  # a file name holds 255 bytes; Argo's names may be longer
        name = hashlib.sha256(lock.key.encode()).hexdigest()
    fd = os.open(directory / f"{name}.{slot}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd
