"""Files in and out: what a person hands us is read whole or refused in one sentence; what we write lands whole.

Every command that takes a file (a VCJob, a cluster config, a workflow, a report) reads it through `read_text` or
`load_document`, so a missing file, a directory, bytes that are not UTF-8 and broken YAML/JSON read the same
everywhere (YAML as Kubernetes reads it: `components.kubeyaml`): an `InputError` naming the file and what to do,
never a traceback. Reports are written atomically, so a reader (the next step, a retry, a person) never sees half
of one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import io
import json
import os
import re
import stat
import sys
import time
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components.errors import InputError

if TYPE_CHECKING:
    import yaml

__all__ = [
    "DATASET_MAX_BYTES",
    "MANIFEST_MAX_BYTES",
    "check_output",
    "check_output_dir",
    "describe_yaml_error",
    "dump_yaml",
    "kind_of",
    "load_document",
    "load_documents",
    "lock_within",
    "make_dirs",
    "NoWriter",
    "open_binary",
    "overwrite_problem",
    "put_output",
    "read_dataset",
    "read_text",
    "refuse_overwriting",
    "remove_made_dirs",
    "source_name",
    "state_home",
    "write_bytes",
    "write_json",
    "write_text",
]


def _label(path: str | Path, what: str) -> str:
    if what and path == STANDARD_INPUT:
        return f"the {what} on {path}"
    return f"{what} {path}" if what else str(path)


STANDARD_INPUT = "standard input"


def source_name(path: str | Path, stdin: bool = True) -> str | Path:
    """How a sentence names what `path` reads: `standard input` for `-` where that means stdin, else the path."""
    return STANDARD_INPUT if stdin and str(path) == "-" else path


# The most a manifest, config or workflow file may hold: five times what a Kubernetes API server takes in one
# request (3 MiB). Past it the file is refused, so that `/dev/zero` or a log given by mistake is not read whole.
MANIFEST_MAX_BYTES = 16 * 1024 * 1024
# The most a JSONL data set read whole (training, evaluation, load-test prompts) may hold: far more than the sets a
# pipeline curates, and bounded, so that `/dev/zero` or a pipe that never ends does not fill memory.
DATASET_MAX_BYTES = 256 * 1024 * 1024


# What each stream (standard input, a pipe, `<(…)`, a socket) gave this process: it can be read only once, and a
# command that reads its input twice (the local runner lints a workflow, then loads it) must get the same bytes
# both times, as from a file. Keyed by standard input's reader (a test's runner gives each command its own) or by
# the stream's device and inode.
_STREAMS: dict[object, bytes] = {}


def read_source(path: str | Path, max_bytes: int | None, *, stdin: bool = False) -> bytes:
    """The bytes at `path` (with `stdin`, `-` is standard input), at most `max_bytes + 1` of them; OSError as `open`.

    A stream is read once per process (`_STREAMS`): reading it again gives what the first read got. A named pipe
    that no program writes to raises NoWriter instead of waiting for one.
    """
    if stdin and str(path) == "-":
        reader = sys.stdin.buffer
        if reader not in _STREAMS:
            _STREAMS[reader] = reader.read() if max_bytes is None else reader.read(max_bytes + 1)
        return _STREAMS[reader]
    mode = os.stat(path)
    if not (stat.S_ISFIFO(mode.st_mode) or stat.S_ISSOCK(mode.st_mode)):  # a file or device is there to read again
        return _read_file(path, max_bytes)
    key = (mode.st_dev, mode.st_ino)
    if key not in _STREAMS:
        _STREAMS[key] = _read_file(path, max_bytes)
    return _STREAMS[key]


def _read_bytes(path: str | Path, what: str, max_bytes: int | None, stdin: bool) -> bytes:
    label = _label(source_name(path, stdin), what)
    try:
        data = read_source(path, max_bytes, stdin=stdin)
    except NoWriter:
        raise InputError(
            f"{label} is a named pipe that no program writes to; give a file, or start its writer first"
        ) from None
    except IsADirectoryError:
        raise InputError(f"{label} is a directory; give a file") from None
    except OSError as err:
        raise InputError(f"cannot read {label}: {err.strerror or err}") from None
    _check_size(data, max_bytes, what, label)
    return data


def _read_file(path: str | Path, max_bytes: int | None) -> bytes:
    with open_binary(path) as file:
        return file.read() if max_bytes is None else file.read(max_bytes + 1)


class NoWriter(OSError):
    """A named pipe that no program writes to: a plain open of it waits for a writer for ever."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(errno.ENXIO, "a named pipe that no program writes to; start its writer first, or give a file")
        self.filename = str(path)


def open_binary(path: str | Path, buffering: int = io.DEFAULT_BUFFER_SIZE) -> io.BufferedReader:
    """`path` opened to read bytes, as `open(path, "rb")`, but a named pipe without a writer raises NoWriter.

    A pipe whose writer is there (`<(cat job.yaml)`, a `mkfifo` whose writer started first) is read as written: the
    byte read to see that a writer is there comes first.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a pipe's plain open waits for a writer
    try:
        first = b""
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            with contextlib.suppress(BlockingIOError):  # its writer is there and has written nothing yet
                first = os.read(fd, 1)
                if not first:
                    raise NoWriter(path)
        os.set_blocking(fd, True)
        raw = os.fdopen(fd, "rb", buffering=0)  # a directory raises here, and leaves `fd` to us
    except BaseException:
        os.close(fd)
        raise
    return io.BufferedReader(_Prefixed(first, raw) if first else raw, buffering)


class _Prefixed(io.RawIOBase):
    """A pipe's first byte, read to see that its writer is there, then the rest of the pipe."""

    def __init__(self, first: bytes, rest: io.RawIOBase) -> None:
        super().__init__()
        self._first, self._rest = first, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        if self._first:
            size = min(len(buffer), len(self._first))
            buffer[:size], self._first = self._first[:size], self._first[size:]
            return size
        return self._rest.readinto(buffer)

    def close(self) -> None:
        self._rest.close()
        super().close()


def _check_size(data: bytes, max_bytes: int | None, what: str, label: str) -> None:
    if max_bytes is not None and len(data) > max_bytes:
        most = "any manifest" if max_bytes == MANIFEST_MAX_BYTES else "vcpilot reads in one file"
        raise InputError(f"{label} holds more than {max_bytes // 2**20} MiB, more than {most}; give the right file")


def _decode(data: bytes, label: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            f"{label} is not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start}); save it as UTF-8"
        ) from None


def read_text(path: str | Path, what: str = "file", *, max_bytes: int | None = None, stdin: bool = False) -> str:
    """The UTF-8 text of `path`; InputError, naming `what` and the file, when it cannot be read or is not text.

    With `max_bytes`, a file (or a device or pipe) that holds more is refused after reading that much. With
    `stdin`, the path `-` is standard input (kubectl's `-f -`).
    """
    return _decode(_read_bytes(path, what, max_bytes, stdin), _label(source_name(path, stdin), what))


def read_dataset(path: str | Path, what: str = "dataset") -> str:
    """The UTF-8 text of a data set, read as `read_text` reads it, refused past DATASET_MAX_BYTES.

    A gzip file (found by its first bytes, whatever its name) is read decompressed, within the same bound, and a
    leading byte-order mark (Windows editors write one) is dropped: neither is part of the first record.
    """
    label = _label(path, what)
    data = _read_bytes(path, what, DATASET_MAX_BYTES, False)
    if data.startswith(b"\x1f\x8b"):
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as file:
                data = file.read(DATASET_MAX_BYTES + 1)
        except (OSError, EOFError, zlib.error) as err:
            raise InputError(f"{label} is a gzip file that cannot be decompressed ({err}); give it whole") from None
        _check_size(data, DATASET_MAX_BYTES, what, label)
    return _decode(data, label).removeprefix("\ufeff")


def describe_yaml_error(err: yaml.YAMLError) -> str:
    """Where and what, in a few words, of a YAML syntax error: `at line 2, column 5: mapping values are not …`."""
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(err, "problem", None) or getattr(err, "context", None) or " ".join(str(err).split())
    return f"{where}: {problem}"


def _parse_all(text: str, label: str) -> list[Any]:
    from components.untrusted import loads_json, unique_keys  # imported here: its patterns are compiled as it loads

    if text.lstrip().startswith(("{", "[")):
        try:
            return [loads_json(text, object_pairs_hook=unique_keys)]
        except ValueError:
            pass  # flow-style YAML starts the same way (and a key twice): the YAML parser says what and where
    import yaml  # imported here: a command that reads no YAML starts without it

    from components import kubeyaml

    try:
        return kubeyaml.load_all(text)
    except yaml.YAMLError as err:
        raise InputError(f"{label} is not valid YAML or JSON{describe_yaml_error(err)}") from None
    except RecursionError:
        raise InputError(f"{label} nests its values too deeply to be read") from None
    except (ValueError, TypeError) as err:  # a constructor's refusal: a bad `!!binary`
        problem = " ".join(str(err).split()) or type(err).__name__
        raise InputError(f"{label} is not valid YAML or JSON: {problem}") from None


def load_documents(
    path: str | Path, what: str = "file", *, max_bytes: int | None = MANIFEST_MAX_BYTES, stdin: bool = False
) -> list[Any]:
    """Every YAML (or JSON) document in `path`, empty ones dropped; InputError for unreadable or broken files.

    With `stdin`, the path `-` is standard input.
    """
    text = read_text(path, what, max_bytes=max_bytes, stdin=stdin)
    return _parse_all(text, _label(source_name(path, stdin), what))


def load_document(path: str | Path, what: str = "file", *, mapping: bool = True) -> Any:
    """The one YAML or JSON document in `path` (a mapping unless `mapping` is false); InputError otherwise.

    An empty file is an empty mapping.
    """
    documents = load_documents(path, what)
    if len(documents) > 1:
        raise InputError(f"{_label(path, what)} holds {len(documents)} YAML documents; give one")
    document = documents[0] if documents else ({} if mapping else None)
    if mapping and not isinstance(document, dict):
        raise InputError(f"{_label(path, what)} must hold a mapping of fields, not {kind_of(document)}")
    return document


def kind_of(value: Any) -> str:
    """What a parsed YAML or JSON value is, in words: "a mapping", "a list", "a string", "a number", "nothing"."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(type(value), f"a {type(value).__name__}")


def check_output(path: str | Path, what: str = "file") -> None:
    """InputError when `path` cannot be a file we write: a directory is there, a file is above it, or it is unwritable.

    Unwritable is a read-only file system, `/proc`, a directory we may not write (`_check_creatable`).
    Called before any work starts, with `what` the option as it is typed (`--report`), so that an unwritable output
    never costs the work, nor comes to light after an action that cannot be undone (a registered model version).
    """
    if Path(path).is_dir():
        raise InputError(f"{_label(path, what)} is a directory; give the path of a file to write")
    if _written_through(Path(path)):  # nothing is made beside it: it must take the bytes itself
        info = _stat(path)
        if info is None:  # a link to a file not there yet: the write creates that file, so it must be creatable
            made = Path(os.path.realpath(path))
            if not made.parent.is_dir():
                raise InputError(f"{_label(path, what)} links to {made}, whose directory does not exist; make it first")
            _check_creatable(made, what, made.parent)
            return
        if stat.S_ISFIFO(info.st_mode):
            return  # opened and closed to see, a pipe would end its reader's stream: its write says
        try:
            os.close(_open_output(Path(path), empty=False))
        except OSError as err:
            raise InputError(f"{_label(path, what)} cannot be written: {err.strerror or err}") from None
        return
    _check_creatable(path, what, _existing_parent(path, what))


def check_output_dir(path: str | Path, option: str) -> None:
    """InputError when `path` cannot be a directory we write into: a file is there or above it, or it is unwritable.

    Unwritable as for `check_output`: no file can be created in it (while it does not exist: where it would be
    made). Called before any work starts, with `option` as it is typed (`--out`).
    """
    _check_creatable(path, option, _directory_or_parent(path, option))


def _directory_or_parent(path: str | Path, option: str) -> Path | None:
    """`path` where it is a directory, else its nearest existing parent; InputError when a file is in the way."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise InputError(f"{option} {path} is a file; give the path of a directory to write into")
    if target.is_symlink() and not target.exists():  # no directory can be made there: mkdir says "File exists"
        raise InputError(
            f"{option} {path} is a symbolic link to nothing (a loop, or a missing target); "
            "give the path of a directory to write into"
        )
    return target if target.is_dir() else _existing_parent(path, option)


def _check_creatable(path: str | Path, what: str, directory: Path | None) -> None:
    """InputError when no file can be created in `directory`, where `path` (or the directories it needs) will go.

    Asked of the file system, not of permission bits (root passes those; `/proc` and a read-only mount refuse
    root too): a uniquely named file is created there and removed at once. The output itself is never touched,
    nor is any directory made.
    """
    if directory is None:
        return
    import tempfile  # here: most commands that import this module write no file (their start-up, benchmarks/cli.py)

    try:
        fd, probe = tempfile.mkstemp(prefix=".vcpilot-write-check-", dir=directory)
    except OSError as err:
        raise InputError(
            f"{_label(path, what)} cannot be written: no file can be created in {directory} "
            f"({err.strerror or err}); give a path in a writable directory"
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):  # ours, made a moment ago: only a directory changed under us keeps it
        os.unlink(probe)


def overwrite_problem(
    inputs: Iterable[tuple[str | Path, str]], outputs: Iterable[tuple[str | Path, str]]
) -> str | None:
    """The sentence refusing the first output that would replace what the command reads; None when none would.

    `inputs` are (path, what it is: `the evaluation set`), `outputs` (path, the option as it is typed: `--report`). An
    output that is an input, by its inode (a link or a second name counts), would replace it (`evaluate --eval-set
    e.jsonl --report e.jsonl`); one that is already there inside an input directory (a model: every file of it is
    read) would replace part of it. Called before anything is written, so a refusal changes nothing.
    """
    read: dict[tuple[int, int], str] = {}
    directories: list[tuple[Path, str]] = []
    for path, what in inputs:
        info = _stat(path)
        if info is None:
            continue
        read.setdefault((info.st_dev, info.st_ino), what)
        if stat.S_ISDIR(info.st_mode):
            directories.append((Path(path), what))
    for path, option in outputs:
        info = _stat(path)
        if info is None:
            continue
        if (same := read.get((info.st_dev, info.st_ino))) is not None:
            return f"{option} {path} is {same} being read: writing there would replace it; give another {option}"
        for directory, holder in directories:
            if _inside(Path(path), directory):
                return (
                    f"{option} {path} is inside {holder} being read: writing there would replace part of it; "
                    f"give another {option}"
                )
    return None


def refuse_overwriting(inputs: Iterable[tuple[str | Path, str]], outputs: Iterable[tuple[str | Path, str]]) -> None:
    """InputError when an output would replace what the command reads (`overwrite_problem` says which)."""
    if (problem := overwrite_problem(inputs, outputs)) is not None:
        raise InputError(problem)


def _stat(path: str | Path) -> os.stat_result | None:
    try:
        return Path(path).stat()
    except (OSError, ValueError):  # a path that does not exist yet, or one the system cannot name
        return None


def _inside(path: Path, directory: Path) -> bool:
    try:
        return path.resolve().is_relative_to(directory.resolve())
    except (OSError, RuntimeError, ValueError):  # a link loop: nothing can be written there anyway
        return False


def state_home() -> Path:
    """`VCPILOT_HOME`, or `./.vcpilot`: where vcpilot keeps its state; InputError when a file is there or above it.

    Every command finds the home here, so a home that is a file reads the same in each, before anything is made.
    """
    given = os.environ.get("VCPILOT_HOME") or ".vcpilot"
    try:
        home = Path(given).resolve()
    except (OSError, RuntimeError) as err:  # a symlink loop: RuntimeError before Python 3.13, OSError after
        raise InputError(f"VCPILOT_HOME {given} cannot be a directory ({err}); point VCPILOT_HOME at one") from None
    # Its shape only: most commands just read it, and a read-only home serves those well.
    _directory_or_parent(home, "VCPILOT_HOME")
    return home


def _existing_parent(path: str | Path, what: str) -> Path | None:
    """The nearest parent of `path` that exists; InputError when it is a file: nothing can be created under it."""
    for parent in Path(path).parents:
        if parent.is_symlink() and not parent.exists():  # nothing can be made under it: "Too many levels of links"
            raise InputError(
                f"{_label(path, what)} is under {parent}, a symbolic link to nothing (a loop, or a missing target); "
                "give a path under a directory"
            )
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{_label(path, what)} is under {parent}, a file; give a path under a directory")
            return parent
    return None


def make_dirs(path: str | Path) -> list[Path]:
    """Create directory `path` and its missing parents; the ones this created, deepest first.

    A run that fails on its input after creating where its output goes hands them to `remove_made_dirs`: a refused
    input changes nothing.
    """
    target = Path(path)
    made = []
    for directory in (target, *target.parents):
        if directory.exists():
            break
        made.append(directory)
    target.mkdir(parents=True, exist_ok=True)
    return made


def remove_made_dirs(made: list[Path]) -> None:
    """Remove the directories `make_dirs` created, deepest first, as long as they are empty."""
    for directory in made:
        try:
            directory.rmdir()
        except OSError:
            return


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` at `path` through a temporary file beside it and `os.replace`: the old file or the new one.

    An OSError names `path` (not the temporary file), and no temporary file is left behind. A symbolic link or a
    stream at `path` (`/dev/stdout`, a pipe) is written into instead (`put_output`).
    """
    target = Path(path)
    if _written_through(target):
        fd = _open_output(target)
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    try:
        if target.is_dir():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except OSError as err:
        if not tmp.is_dir():
            tmp.unlink(missing_ok=True)
        raise type(err)(err.errno, err.strerror, str(target)) from None
    return target


def put_output(tmp: Path, target: str | Path) -> None:
    """Put the finished temporary file `tmp` at `target` by `os.replace`, unless `target` is not a plain file.

    A symbolic link (it keeps pointing where it did) and anything that is not a regular file (a terminal,
    `/dev/null`, `/dev/stdout`, a pipe a program reads) are written into, and `tmp` removed: renamed over,
    `/dev/stdout` would become a regular file for every process of the machine. A named pipe that no program reads
    is an OSError (ENXIO), not a wait for ever.
    """
    target = Path(target)
    if not _written_through(target):
        os.replace(tmp, target)
        return
    import shutil

    try:
        with os.fdopen(_open_output(target), "wb") as stream, tmp.open("rb") as data:
            shutil.copyfileobj(data, stream)
    finally:
        tmp.unlink(missing_ok=True)


def _written_through(target: Path) -> bool:
    """Whether an output at `target` is written into rather than replaced: a link, or not a regular file.

    A link to a file not there yet is written through too: the write creates that file, as a shell's `>` does.
    """
    info = _stat(target)
    if info is not None and stat.S_ISDIR(info.st_mode):
        return False
    return target.is_symlink() or (info is not None and not stat.S_ISREG(info.st_mode))


def _open_output(target: Path, *, empty: bool = True) -> int:
    """A descriptor writing into `target`, emptied first where it is a file; ENXIO for a pipe no program reads.

    `/dev/stdout`, `/dev/fd/N` and `/proc/self/fd/N` are this process's own descriptor N, duplicated: opened anew,
    a file the shell redirected to would be written from its start again, over what the process printed.
    """
    if (own := _own_descriptor(target)) is not None:
        return os.dup(own)
    info = _stat(target)
    truncate = os.O_TRUNC if empty and info is not None and stat.S_ISREG(info.st_mode) else 0
    create = os.O_CREAT if info is None else 0  # a link to a file not there yet
    try:
        # Not blocking: the open of a pipe with no reader would wait for one.
        fd = os.open(target, os.O_WRONLY | truncate | create | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as err:
        if err.errno == errno.ENXIO:
            raise OSError(
                errno.ENXIO, "a named pipe that no program reads; start its reader first, or give a file", str(target)
            ) from None
        raise
    os.set_blocking(fd, True)
    return fd


_OWN_DESCRIPTOR = re.compile(r"/(?:proc/self|dev)/fd/(\d+)")


def _own_descriptor(target: Path) -> int | None:
    """N where `target` is, or links through, `/dev/fd/N` or `/proc/self/fd/N` (`/dev/stdout` is a link to one)."""
    path = str(target)
    for _ in range(8):  # a chain of links; a loop ends here
        if found := _OWN_DESCRIPTOR.fullmatch(path):
            return int(found.group(1))
        try:
            link = os.readlink(path)
        except OSError:  # not a link
            return None
        path = os.path.normpath(os.path.join(os.path.dirname(path), link))
    return None


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) at `path`, atomically."""
    return write_bytes(path, text.encode("utf-8"))


def dump_yaml(data: Any) -> str:
    """`data` as block YAML in the order given (a manifest as people read it), as Kubernetes reads it back.

    By libyaml where PyYAML has it (`vcpilot plan` prints a VCJob); `kubeyaml.dump` quotes what go-yaml would misread.
    """
    from components import kubeyaml

    return kubeyaml.dump(data)


def write_json(path: str | Path, data: Any) -> Path:
    """Write `data` as indented JSON (one trailing newline) at `path`, atomically."""
    return write_text(path, json.dumps(data, indent=2) + "\n")


def lock_within(fd: int, wait_s: float) -> bool:
    """Take an exclusive flock on `fd`, trying for up to `wait_s` seconds; False when another process keeps it.

    The lock goes with the process that holds it, killed or not; `wait_s` covers one killed a moment ago whose
    children (a fork that has not yet closed what it inherited) still hold it.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
