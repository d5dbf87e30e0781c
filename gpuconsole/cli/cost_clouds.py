"""``gpuconsole cost clouds GPU``: what one GPU-hour of the same GPU costs on every watched cloud,
each in its own currency and converted to US dollars through ``[money] rates``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

from gpuconsole.cli.table import Column, add_wide_option, render_table, width_of, wrap

COLUMNS = (Column("CLOUD"), Column("TYPE", key=True), Column("REGION"), Column("GPUS", right=True),
           Column("PER GPU-H", right=True), Column("USD/GPU-H", right=True))


def add_clouds_parser(commands: Any, common: argparse.ArgumentParser | None) -> None:
    p = commands.add_parser(
        "clouds",
        parents=[common] if common is not None else [],
        help="the same GPU on every watched cloud: per GPU-hour, own currency and in US dollars",
        description="The on-demand price of one GPU-hour of GPU (A100, T4, A10…) on every watched cloud and "
                    "region, in the cloud's own currency and converted to US dollars through [money] rates "
                    "(unknown where no rate names the currency).",
    )
    p.add_argument("gpu", metavar="GPU", help="a GPU family: A100, H100, A10, A10G, T4, L4…")
    p.add_argument("--in", dest="clouds_regions", action="append", metavar="REGION",
                   help="only this region (repeat for more; default: every region the catalog prices)")
    p.add_argument("--json", dest="clouds_json", action="store_true", help="print JSON")
    add_wide_option(p)


def _money(currency: str, value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"${value:,.4f}" if currency == "USD" else f"{currency} {value:,.4f}"


def run_clouds(args: argparse.Namespace, make_console: Callable[..., Any], out: TextIO | None = None,
               err: TextIO | None = None) -> int:
    """Exit 0 with the table (a GPU no cloud prices says so), 1 when no cloud is watched."""
    from gpuconsole.core.ops.cloud_prices import gpu_hour_prices

    out, err = out or sys.stdout, err or sys.stderr
    console = make_console(args, act_on_budgets=False)
    try:
        cloud = console.services.cloud
        if not cloud.available:
            print("gpuconsole: cannot compare clouds: no cloud is watched (--cloud, [alibaba], AWS credentials)", file=err)
            return 1
        rates = dict(console.services.budget_ops.book.config.rates)
        rows = gpu_hour_prices(cloud.catalog(), args.gpu, rates)
        if args.clouds_regions:
            rows = tuple(r for r in rows if r.region in args.clouds_regions)
        missing = sorted({r.currency for r in rows if r.usd_per_gpu_hour is None})
        doc = {"gpu": args.gpu, "rows": [{"cloud": r.cloud, "instance_type": r.instance_type, "region": r.region,
                                          "gpus": r.gpus, "gpu_model": r.gpu_model, "currency": r.currency,
                                          "per_gpu_hour": r.per_gpu_hour, "usd_per_gpu_hour": r.usd_per_gpu_hour}
                                         for r in rows],
               "rates": rates, "missing_rates": missing, "catalog_note": cloud.catalog_note or None}
        if args.clouds_json:
            json.dump(doc, out, indent=2)
            out.write("\n")
            return 0
        width = width_of(args)
        lines = render_table(COLUMNS, [(r.cloud, r.instance_type, r.region, str(r.gpus), _money(r.currency, r.per_gpu_hour),
                                        _money("USD", r.usd_per_gpu_hour)) for r in rows], width)
        if not rows:
            lines.append(f"no watched cloud prices a {args.gpu} type")
        if missing:
            lines.append(wrap(f"no [money] rates for {', '.join(missing)}: their dollar prices are unknown", width))
        out.write("\n".join(lines) + "\n")
        return 0
    finally:
        console.close()
