"""`vcpilot demo data`: generate the demo's logs and datasets from a seed, for people and for `make demo`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from components.demo.catalog import CatalogConfig
from components.demo.data import DemoConfig, DemoSummary, write_demo

__all__ = ["app", "data_command", "make_demo"]

app = typer.Typer(
    help="The demo's data: a shop assistant's logs with a drift, generated from a seed.", no_args_is_help=True
)


def make_demo(out: Path, *, seed: int, items: int, new_items: int, changed_share: float, requests: int) -> DemoSummary:
    """Validate the options and write the demo data; ValueError says in one sentence what is wrong."""
    try:
        catalog = CatalogConfig(items=items, new_items=new_items, changed_share=changed_share)
        config = DemoConfig(seed=seed, catalog=catalog, requests=requests)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "option"
        raise ValueError(f"{field}: {first['msg']}") from None
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file; give a directory to write the demo data into")
    try:
        return write_demo(out, config)
    except OSError as err:
        raise ValueError(f"cannot write the demo data under {out}: {err.strerror or err}") from None


@app.command("data")
def data_command(
    out: Annotated[Path, typer.Option("--out", help="Directory to write logs/, data/ and demo.json into.")],
    seed: Annotated[int, typer.Option(help="The same seed gives the same bytes.")] = 0,
    items: Annotated[int, typer.Option(help="Items in the baseline catalog (4-100).")] = 48,
    new_items: Annotated[int, typer.Option("--new-items", help="Items added in the current window (0-20).")] = 12,
    changed_share: Annotated[float, typer.Option("--changed-share", help="Share of prices that change.")] = 0.5,
    requests: Annotated[int, typer.Option(help="Requests per window.")] = 600,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Generate the demo's service logs, request logs and datasets (baseline and drifted)."""
    try:
        summary = make_demo(
            out, seed=seed, items=items, new_items=new_items, changed_share=changed_share, requests=requests
        )
    except ValueError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(summary.model_dump(mode="json"), indent=2))
        return
    current = summary.windows["current"]
    typer.echo(
        f"wrote {len(summary.files)} files under {out}: {len(summary.changed)} prices changed and "
        f"{len(summary.new)} items added in the current window, where {current['negative']} of "
        f"{current['requests']} requests got negative feedback and {current['corrections']} a correction"
    )
