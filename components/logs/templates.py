"""Drain3 template mining, configured in code, with its state kept in a file between runs.

Template ids only mean something across days if the miner remembers them: tonight's run loads yesterday's
tree from the state file, so `log:17` tonight is the event `log:17` was yesterday and a new id is a new event.

Two choices differ from Drain3's defaults, and both come from measuring grouping accuracy on Loghub:
variables are masked before mining (`masking.message_tokens`), and similarity counts only the template's
constant tokens — a `<*>` neither helps nor hurts a match — so that lines which differ in one word
(`Failed password` / `Failed none`) stay apart while lines full of variables still group.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from itertools import compress, repeat
from operator import eq, ne
from pathlib import Path
from typing import Any

from drain3 import TemplateMiner
from drain3.drain import Drain
from drain3.file_persistence import FilePersistence
from drain3.template_miner_config import TemplateMinerConfig
from pydantic import BaseModel, ConfigDict, Field

from components.files import put_output
from components.logs.masking import MASK
from components.logs.merging import merge_templates
from components.logs.reader import LogSourceError

__all__ = ["Miner", "MinerSettings"]


class MinerSettings(BaseModel):
    """The one generic Drain configuration used for every log format."""

    model_config = ConfigDict(frozen=True)

    similarity: float = Field(default=0.9, gt=0, le=1, description="share of constant tokens that must match")
    depth: int = Field(default=5, ge=3, description="Drain tree depth: the first depth-2 tokens route a line")
    max_children: int = Field(default=100, ge=2)
    max_clusters: int | None = Field(default=50_000, ge=1, description="least recently used templates are dropped")
    max_tokens: int = Field(default=100, ge=1, description="tokens of a line that take part in matching")
    merge_min_values: int | None = Field(
        default=6,  # what leave-one-dataset-out over the six Loghub sets chooses (benchmarks/logs.py)
        ge=2,
        description="after mining, join templates that differ in one position taking this many values (None: never)",
    )

    def config(self) -> TemplateMinerConfig:
        """The Drain3 configuration object these settings stand for."""
        config = TemplateMinerConfig()
        config.drain_sim_th = self.similarity
        config.drain_depth = self.depth
        config.drain_max_children = self.max_children
        config.drain_max_clusters = self.max_clusters
        config.masking_instructions = []  # we mask ourselves, once, before Drain sees the line
        config.parametrize_numeric_tokens = True
        config.snapshot_compress_state = True
        return config


class _ConstantTokenDrain(Drain):  # type: ignore[misc]
    """Drain whose similarity is the share of the template's constant tokens that the line repeats."""

    def get_content_as_tokens(self, content: Any) -> Any:
        # `Miner.add` hands over the masked tokens; joining them only for Drain to split them again costs time.
        return content if isinstance(content, list) else super().get_content_as_tokens(content)

    def get_seq_distance(self, seq1: Any, seq2: Any, include_params: bool) -> tuple[float, int]:
        # Runs for every candidate template of every line: counted with C-level iterators, not a Python loop.
        param = self.param_str
        params = seq1.count(param)
        constants = len(seq1) - params
        if constants == 0:  # a template of variables only matches a line of variables only
            return (1.0 if seq2.count(param) == len(seq2) else 0.0), params
        same = sum(compress(map(eq, seq1, seq2), map(ne, seq1, repeat(param))))
        return same / constants, params


class _AtomicFilePersistence(FilePersistence):  # type: ignore[misc]
    """FilePersistence that never leaves half a state file behind: write a temporary file, then rename it."""

    def save_state(self, state: bytes) -> None:
        path = Path(self.file_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_bytes(state)
        put_output(temporary, path)  # a link keeps pointing where it did

    def load_state(self) -> bytes | None:
        # Checked here, on the very bytes Drain3 then decodes: a file swapped after a check would be loaded unchecked.
        state: bytes | None = super().load_state()
        if state is not None:
            _check_objects(state, Path(self.file_path))
        return state


# How every state `Miner.save` writes begins, once its base64 and zlib are undone (`MinerSettings.config` compresses
# it): jsonpickle's JSON of our Drain. Older states hold Drain3's own class.
_STATE_HEADS = tuple(
    f'{{"py/object": "{cls.__module__}.{cls.__qualname__}"'.encode() for cls in (_ConstantTokenDrain, Drain)
)


def _check_ours(state_file: Path) -> None:
    """LogSourceError unless `state_file` is missing (a new state) or begins as a state we write.

    A file we cannot tell is ours is not loaded (jsonpickle builds whatever objects it names) and is never called
    damaged: deleting it is not ours to advise.
    """
    try:
        with state_file.open("rb") as file:
            head = file.read(4096)  # a whole number of base64 quanta
    except FileNotFoundError:
        return
    except OSError as err:
        raise LogSourceError(f"cannot read the template state {state_file}: {err.strerror or err}") from None
    try:
        text = zlib.decompressobj().decompress(base64.b64decode(head[: len(head) // 4 * 4], validate=True), 200)
    except (binascii.Error, zlib.error):
        text = b""
    if not text.startswith(_STATE_HEADS):
        raise LogSourceError(
            f"{state_file} is not a template state written by vcpilot; pass another --state path "
            "(one that does not exist yet starts afresh)"
        )


# What jsonpickle may build from a state: the classes `Miner.save` writes (drain3's Drain, its nodes, clusters and
# LRU cache) and the OrderedDict of that cache. jsonpickle builds whatever a file names — `py/function`,
# `py/reduce` of any callable, `py/repr` — so a crafted state would run code as it loads: anything else is refused.
_STATE_CLASSES = frozenset(
    {
        f"{_ConstantTokenDrain.__module__}.{_ConstantTokenDrain.__qualname__}",
        "drain3.drain.Drain",
        "drain3.drain.Node",
        "drain3.drain.LogCluster",
        "drain3.drain.LogClusterCache",
        "drain3.simple_profiler.NullProfiler",
    }
)
_ORDERED_DICT = {"py/type": "collections.OrderedDict"}
_KEY_PREFIX = "json://"  # jsonpickle's `keys=True`: a key that is itself encoded, and decoded as a value is


def _check_objects(state: bytes, state_file: Path) -> None:
    """LogSourceError unless the state (base64 of zlib of jsonpickle's JSON) builds only `_STATE_CLASSES`."""
    try:
        document = json.loads(zlib.decompress(base64.b64decode(state, validate=True)))
    except (binascii.Error, zlib.error, ValueError):
        raise LogSourceError(
            f"the template state {state_file} is damaged and cannot be loaded: delete it to start afresh"
        ) from None
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if key.startswith(_KEY_PREFIX):
                try:
                    stack.append(json.loads(key[len(_KEY_PREFIX) :]))
                except ValueError:
                    pass  # jsonpickle keeps a key it cannot decode as the string it is
            allowed = (
                not key.startswith("py/")
                or key in ("py/tuple", "py/id")
                or (key == "py/object" and value in _STATE_CLASSES)
                or (key == "py/type" and value == _ORDERED_DICT["py/type"])
                or (key == "py/reduce" and isinstance(value, list) and value[:1] == [_ORDERED_DICT])
            )
            if not allowed:
                raise LogSourceError(
                    f"the template state {state_file} asks to build {key} {str(value)[:80]!r}, which no state of "
                    "ours holds; it is not loaded (pass another --state path)"
                )
            stack.append(value)


_SETTLED_KEPT = 65_536  # token lists `Miner` remembers the match of; past it, it forgets them all and starts again


class Miner:
    """A Drain3 template miner fed with masked tokens; with a `state_file`, it resumes from and saves to it."""

    def __init__(self, settings: MinerSettings | None = None, state_file: Path | None = None) -> None:
        self.settings = settings or MinerSettings()
        self.state_file = state_file
        self._shown: dict[int, list[str]] = {}  # per template, its tokens as shown (not kept in the state file)
        # Token lists whose line changed nothing (`add`), with their cluster; emptied whenever the tree changes.
        self._settled: dict[tuple[str, ...], Any] = {}
        config = self.settings.config()
        self._miner = TemplateMiner(persistence_handler=None, config=config)
        self._miner.drain = self._drain = _ConstantTokenDrain(
            sim_th=config.drain_sim_th,
            depth=config.drain_depth,
            max_children=config.drain_max_children,
            max_clusters=config.drain_max_clusters,
            param_str=MASK,
            parametrize_numeric_tokens=config.parametrize_numeric_tokens,
        )
        if state_file is not None:
            self._miner.persistence_handler = _AtomicFilePersistence(str(state_file))
            _check_ours(state_file)
            try:
                self._miner.load_state()
            except LogSourceError:
                raise
            except Exception as err:  # jsonpickle/zlib raise many kinds on a damaged file
                raise LogSourceError(
                    f"the template state {state_file} is damaged and cannot be loaded: delete it to start afresh"
                ) from err

    def add(self, tokens: list[str], shown: list[str] | None = None) -> int:
        """Mine one line (its masked tokens, see `masking.shown_tokens`); returns its template's id.

        `shown` (the tokens as a template shows them, `blk_<*>`) lets `template` keep what is constant inside a
        token; without it a token with a variable reads `<*>`.
        """
        key = tuple(tokens)
        cluster = self._settled.get(key)
        if cluster is not None:
            # What Drain's `add_log_message` would do: the same tokens against the same tree find the same cluster,
            # whose template they leave as it is; its size grows and it becomes the most recently used.
            cluster.size += 1
            self._drain.id_to_cluster[cluster.cluster_id]  # noqa: B018  # the LRU cache's touch
        else:
            cluster, change = self._drain.add_log_message(tokens)
            if change != "none" or len(self._settled) >= _SETTLED_KEPT:
                self._settled.clear()  # a cluster created (or dropped) or a template changed: any match may differ
            if change == "none":
                self._settled[key] = cluster
        identity = int(cluster.cluster_id)
        if shown is not None:
            known = self._shown.get(identity)
            if known is None or len(known) != len(shown):
                self._shown[identity] = shown
            elif known != shown:
                self._shown[identity] = [a if a == b else MASK for a, b in zip(known, shown, strict=True)]
        return identity

    def template(self, cluster_id: int) -> str:
        """The template of `cluster_id` as mined so far (`<*>` for variables), or '' when it was dropped."""
        cluster = self._drain.id_to_cluster.get(cluster_id)
        if cluster is None:
            return ""
        tokens = cluster.log_template_tokens
        shown = self._shown.get(cluster_id)
        if shown is None or len(shown) != len(tokens):
            return str(cluster.get_template())
        return " ".join(s if t == MASK else t for t, s in zip(tokens, shown, strict=True))

    def events(self) -> dict[int, tuple[int, str]]:
        """Each template's event after the merge pass (`merging.merge_templates`): `{id: (event id, template)}`.

        Without `merge_min_values` every template is its own event.
        """
        clusters = {int(c.cluster_id): c for c in self._drain.clusters}
        if self.settings.merge_min_values is None:
            return {identity: (identity, self.template(identity)) for identity in clusters}
        joins = merge_templates(
            {identity: cluster.log_template_tokens for identity, cluster in clusters.items()},
            min_values=self.settings.merge_min_values,
        )
        shown: dict[int, list[str]] = {}
        for identity, event in joins.items():
            tokens = self.template(identity).split(" ")
            known = shown.setdefault(event, tokens)
            if known is not tokens:
                shown[event] = [a if a == b else MASK for a, b in zip(known, tokens, strict=True)]
        return {identity: (event, " ".join(shown[event])) for identity, event in joins.items()}

    @property
    def known(self) -> int:
        """How many templates the miner holds, including those learnt in earlier runs."""
        return len(self._drain.id_to_cluster)

    def save(self) -> None:
        """Write the miner's state to its state file (nothing without one)."""
        if self.state_file is not None:
            self._miner.save_state("end of run")
