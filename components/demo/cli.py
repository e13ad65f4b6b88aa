"""`vcpilot demo data` and `python -m components.demo`: the demo's logs and datasets, generated from a seed.

The pod's (or a Makefile's) spelling, `python -m components.demo --out DIR`, is `data` (the command that runs when
none is named). The work is `components.demo.data.make_demo`; exit codes are every step program's
(components/errors.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from components.entry import JsonOption, new_app

__all__ = ["app", "data_command", "demo"]

app = new_app(help="The demo's data: a shop assistant's logs with a drift, generated from a seed.")


@app.callback()
def demo() -> None:
    """The demo's data: a shop assistant's logs with a drift, generated from a seed."""  # keeps `data` a subcommand


@app.command("data")
def data_command(
    out: Annotated[Path, typer.Option("--out", help="Directory to write logs/, data/ and demo.json into.")],
    seed: Annotated[int, typer.Option(help="The same seed gives the same bytes.")] = 0,
    items: Annotated[int, typer.Option(help="Items in the baseline catalog (4-100).")] = 48,
    new_items: Annotated[int, typer.Option("--new-items", help="Items added in the current window (0-20).")] = 12,
    changed_share: Annotated[float, typer.Option("--changed-share", help="Share of prices that change.")] = 0.5,
    requests: Annotated[int, typer.Option(help="Requests per window.")] = 600,
    as_json: JsonOption = False,
) -> None:
    """Generate the demo's service logs, request logs and datasets (baseline and drifted)."""
    from components.demo.data import make_demo

    summary = make_demo(
        out, seed=seed, items=items, new_items=new_items, changed_share=changed_share, requests=requests
    )
    if as_json:
        typer.echo(json.dumps(summary.model_dump(mode="json"), indent=2))
        return
    current = summary.windows["current"]
    typer.echo(
        f"wrote {len(summary.files)} files under {out}: {len(summary.changed)} prices changed and "
        f"{len(summary.new)} items added in the current window, where {current['negative']} of "
        f"{current['requests']} requests got negative feedback and {current['corrections']} a correction"
    )
