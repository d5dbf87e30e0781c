"""``gpuconsole cost compare``: own server vs cloud on-demand vs spot for one training run.

The numbers come from :mod:`gpuconsole.core.money.calculator`, the same arithmetic as the console's
calculator screen. Start from a preset (``--preset resnet50``) and override any input with a
flag, or give your own: the work, a cloud price (an instance type and region from the GPU
catalog, or a price per GPU-hour) and the own server's price and power. Every bad value is one
line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import textwrap
from dataclasses import asdict, replace
from typing import Any, TextIO

from gpuconsole.core.money.calculator import (
    INDEX_FORMULA,
    INDEX_MEANING,
    LABELS,
    PRESETS,
    CalculatorError,
    CostInputs,
    Option,
    Preset,
    compare,
    from_catalog,
    parse_period,
    reproduces,
)

SCHEMA = "gpuconsole.cost-compare/1"
COMBINATION = ""  # the field of a problem with how flags go together, not with one value
DEFAULT_REGION = "us-east-1"
SHORT_NAMES = {"own": "own", "on-demand": "on-demand", "spot": "spot"}

EPILOG = f"""\
how each option is priced (W = reference GPU-hours; hours are wall-clock):
  on-demand  time = run = W / (cloud GPUs × cloud speed)
             cost = $/GPU-hour × cloud GPUs × run + extras
  spot       n = interruptions/day × run / 24
             time = run + n × (lost h + restart min / 60)
             cost = spot $/GPU-hour × cloud GPUs × (run + n × lost h) + extras
  own        time = W / (own GPUs × own speed)
             cost = time × (hardware $ / (months × 730 h × utilisation)
                            + kW × $/kWh)
  {INDEX_FORMULA}
{textwrap.fill(f"({INDEX_MEANING})", 78, initial_indent=" " * 13, subsequent_indent=" " * 14)}

presets: {", ".join(PRESETS)}

examples:
  gpuconsole cost compare --preset resnet50
  gpuconsole cost compare --preset resnet50 --spot-discount 60 --json
  gpuconsole cost compare --gpus 8 --hours 100 \\
      --instance-type p4d.24xlarge --region us-west-2 \\
      --own-hardware-usd 150000 --own-power-kw 6.5
"""

# Each input's flag, so a problem the calculator finds names what the user typed.
FLAGS: dict[str, str] = {
    "gpu_hours": "--gpu-hours",
    "cloud_gpus": "--cloud-gpus",
    "gpu_hour_price": "--gpu-hour-price",
    "own_gpus": "--own-gpus",
    "own_hardware_usd": "--own-hardware-usd",
    "own_power_kw": "--own-power-kw",
    "cloud_speed": "--cloud-speed",
    "cloud_extras": "--cloud-extras-usd",
    "spot_discount_pct": "--spot-discount",
    "spot_gpu_hour_price": "--spot-price",
    "interruptions_per_day": "--interruptions-per-day",
    "lost_hours": "--lost-hours",
    "restart_minutes": "--restart-minutes",
    "own_speed": "--own-speed",
    "own_amortize_months": "--own-amortize-months",
    "own_utilisation_pct": "--own-utilisation",
    "kwh_usd": "--kwh-usd",
    "cloud_label": "--instance-type",
}

# Flags that map one to one onto a CostInputs field (the others are combined below).
_DIRECT = ("cloud_gpus", "gpu_hour_price", "own_gpus", "own_hardware_usd", "own_power_kw", "cloud_speed",
           "cloud_extras", "spot_discount_pct", "spot_gpu_hour_price", "interruptions_per_day", "lost_hours",
           "restart_minutes", "own_speed", "own_utilisation_pct", "kwh_usd")


def _number(text: str) -> float:
    """A finite number; ``$``, thousands separators and a trailing ``%`` are allowed."""
    words = text.strip().replace(",", "").replace("_", "").lstrip("$").rstrip("%").strip()
    try:
        value = float(words)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text.strip().replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def _period(text: str) -> float:
    try:
        return parse_period(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_cost_parser(sub: Any, common: argparse.ArgumentParser | None = None) -> None:
    """Add ``cost compare`` and ``cost reconcile`` to the ``gpuconsole`` subcommands (``sub``: its
    subparsers action; ``common``: the data-source options ``reconcile`` needs)."""
    cost = sub.add_parser(
        "cost",
        help="compare what a training run costs: own server, cloud on-demand, cloud spot",
        description="Cost calculators for GPU work.",
    )
    commands = cost.add_subparsers(dest="cost_command", metavar="COMMAND", parser_class=type(cost), required=True)
    from gpuconsole.cli.cost_reconcile import add_reconcile_parser

    add_reconcile_parser(commands, common)
    from gpuconsole.cli.cost_clouds import add_clouds_parser

    add_clouds_parser(commands, common)
    p = commands.add_parser(
        "compare",
        help="cost, completion time and price-performance of own server vs on-demand vs spot",
        description="Cost, completion time and a price-performance index of one training run on an own server, "
                    "cloud on-demand and cloud spot. Start from --preset and override inputs, or give your own "
                    "(the defaults below apply without --preset; with one, its values are the defaults).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--preset", choices=tuple(PRESETS), help="start from a preset's inputs (resnet50: the deployment guide's table)")
    p.add_argument("--json", dest="cost_json", action="store_true", help="print JSON (inputs, options, index formula)")
    work = p.add_argument_group("the work (in GPU-hours of a reference GPU, e.g. one of the own server's)")
    work.add_argument("--gpu-hours", type=_number, metavar="W", help="GPU-hours of work on the reference GPU")
    work.add_argument("--gpus", dest="work_gpus", type=_count, metavar="N", help="or: N reference GPUs …")
    work.add_argument("--hours", dest="work_hours", type=_number, metavar="H", help="… for H hours")
    cloud = p.add_argument_group("the cloud (on-demand and spot)")
    cloud.add_argument("--instance-type", metavar="TYPE", help="price from the GPU catalog: on-demand price ÷ its GPUs")
    cloud.add_argument("--region", dest="cost_region", metavar="R", help=f"the catalog price's region (default {DEFAULT_REGION})")
    cloud.add_argument("--instances", type=_count, metavar="K", help="instances of --instance-type the run uses (default 1)")
    cloud.add_argument("--gpu-hour-price", type=_number, metavar="USD", help="or: the on-demand price of one GPU for an hour")
    cloud.add_argument("--cloud-gpus", type=_count, metavar="N", help="GPUs the cloud run uses (default: the instance type's, else 1)")
    cloud.add_argument("--cloud-speed", type=_number, metavar="X", help="one cloud GPU's speed relative to the reference (default 1)")
    cloud.add_argument("--cloud-extras-usd", dest="cloud_extras", type=_number, metavar="USD", help="per run: storage, data transfer (default 0)")
    spot = p.add_argument_group("spot")
    spot.add_argument("--spot-discount", dest="spot_discount_pct", type=_number, metavar="PCT", help="percent off the on-demand price (default 70)")
    spot.add_argument("--spot-price", dest="spot_gpu_hour_price", type=_number, metavar="USD", help="or: the spot price of one GPU for an hour")
    spot.add_argument("--interruptions-per-day", type=_number, metavar="N", help="interruptions per 24 h of work (default 1)")
    spot.add_argument("--lost-hours", type=_number, metavar="H", help="work lost per interruption, redone and billed (default 0.5)")
    spot.add_argument("--restart-minutes", type=_number, metavar="M", help="per interruption until training resumes, not billed (default 10)")
    own = p.add_argument_group("the own server")
    own.add_argument("--own-hardware-usd", type=_number, metavar="USD", help="purchase price")
    own.add_argument("--own-amortize-months", type=_period, metavar="M", help="written off over M months (default 36; 3y works too)")
    own.add_argument("--own-amortize-years", type=_number, metavar="Y", help="or: over Y years")
    own.add_argument("--own-utilisation", dest="own_utilisation_pct", type=_number, metavar="PCT", help="percent of that period it does useful work (default 50)")
    own.add_argument("--own-power-kw", type=_number, metavar="KW", help="power draw while working, with cooling")
    own.add_argument("--kwh-usd", type=_number, metavar="USD", help="electricity price per kWh (default 0.15)")
    own.add_argument("--own-gpus", type=_count, metavar="N", help="GPUs in the own server (default: the cloud GPUs)")
    own.add_argument("--own-speed", type=_number, metavar="X", help="one own GPU's speed relative to the reference (default 1)")


def _given(args: argparse.Namespace, name: str) -> Any:
    return getattr(args, name, None)


def inputs_from_args(args: argparse.Namespace) -> tuple[CostInputs, Preset | None]:
    """The calculator's inputs from the flags, and the preset they started from.

    Raises:
        CalculatorError: a flag is missing, contradicts another, or has a value the
            calculator cannot use.
    """
    preset = PRESETS[args.preset] if _given(args, "preset") else None
    changes: dict[str, Any] = {name: _given(args, name) for name in _DIRECT if _given(args, name) is not None}

    gpus, hours, gpu_hours = _given(args, "work_gpus"), _given(args, "work_hours"), _given(args, "gpu_hours")
    if gpu_hours is not None and (gpus is not None or hours is not None):
        raise CalculatorError(COMBINATION, "give --gpu-hours, or --gpus and --hours, not both")
    if (gpus is None) != (hours is None):
        raise CalculatorError(COMBINATION, "--gpus and --hours go together")
    if gpus is not None:
        for flag, value in (("--gpus", gpus), ("--hours", hours)):
            if not value > 0:  # named as typed, not as the --gpu-hours they would make
                raise CalculatorError(COMBINATION, f"argument {flag}: must be more than 0, got {value:g}")
        gpu_hours = gpus * hours
    if gpu_hours is not None:
        changes["gpu_hours"] = gpu_hours

    months, years = _given(args, "own_amortize_months"), _given(args, "own_amortize_years")
    if months is not None and years is not None:
        raise CalculatorError(COMBINATION, "give --own-amortize-months or --own-amortize-years, not both")
    if years is not None:
        months = years * 12.0
    if months is not None:
        changes["own_amortize_months"] = months

    instance_type = _given(args, "instance_type")
    if instance_type is not None and "gpu_hour_price" in changes:
        raise CalculatorError(COMBINATION, "give --instance-type or --gpu-hour-price, not both")
    if instance_type is None and (_given(args, "cost_region") is not None or _given(args, "instances") is not None):
        raise CalculatorError(COMBINATION, "--region and --instances need --instance-type")
    if "spot_gpu_hour_price" in changes and "spot_discount_pct" in changes:
        raise CalculatorError(COMBINATION, "give --spot-discount or --spot-price, not both")
    if "spot_discount_pct" in changes:
        changes["spot_gpu_hour_price"] = None  # a discount given now wins over a preset's spot price
    if "gpu_hour_price" in changes:
        changes["cloud_label"] = ""

    if preset is None:
        missing = [flag for flag, there in (
            ("--gpu-hours (or --gpus and --hours)", "gpu_hours" in changes),
            ("--instance-type (or --gpu-hour-price)", instance_type is not None or "gpu_hour_price" in changes),
            ("--own-hardware-usd", "own_hardware_usd" in changes),
            ("--own-power-kw", "own_power_kw" in changes),
        ) if not there]
        if missing:
            raise CalculatorError(COMBINATION, "without --preset, give " + ", ".join(missing))
        base = CostInputs(gpu_hours=changes["gpu_hours"], cloud_gpus=1, gpu_hour_price=changes.get("gpu_hour_price", 1.0),
                          own_gpus=1, own_hardware_usd=changes["own_hardware_usd"], own_power_kw=changes["own_power_kw"])
    else:
        base = preset.inputs

    if instance_type is not None:
        from gpuconsole.core.money.catalog import bundled_catalog

        base = from_catalog(bundled_catalog(), instance_type, _given(args, "cost_region") or DEFAULT_REGION, base,
                            instances=_given(args, "instances") or 1)
    inputs = replace(base, **changes)
    if preset is None and "own_gpus" not in changes:
        inputs = replace(inputs, own_gpus=inputs.cloud_gpus)
    return inputs, preset


def document(inputs: CostInputs, options: tuple[Option, ...], preset: Preset | None,
             preset_name: str | None) -> dict[str, Any]:
    """The JSON document: inputs, the three options, the index formula and the preset's table."""
    return {
        "schema": SCHEMA,
        "preset": preset_name,
        "inputs": {**asdict(inputs), "spot_price": inputs.spot_price},
        "options": [{"key": o.key, "name": o.name, **{k: v for k, v in asdict(o).items() if k != "key"}}
                    for o in options],
        "index_formula": INDEX_FORMULA,
        "index_meaning": INDEX_MEANING,
        "published": None if preset is None or not preset.published else [
            {"key": key, "cost": cost, "hours": hours} for key, cost, hours in preset.published
        ],
        "reproduces_published": None if preset is None or not preset.published else reproduces(preset, options),
    }


def usd(amount: float) -> str:
    """``$1,200.00``: a sum of money, to the cent."""
    return f"${amount:,.2f}"


def price(amount: float) -> str:
    """``$0.78125``: a unit price, with the digits it was given (up to five decimals)."""
    whole, _, cents = f"{amount:,.5f}".partition(".")
    cents = cents.rstrip("0")
    return f"${whole}.{cents:0<2}"


def _g(value: float) -> str:
    return f"{value:,.6g}"


def render_text(inputs: CostInputs, options: tuple[Option, ...], preset: Preset | None) -> str:
    """A plain-text report (no colour, fits 80 columns)."""
    lines: list[str] = []
    if preset is not None:
        lines.append(f"preset: {preset.title}")
        lines.extend(textwrap.wrap(preset.source, 78, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False))
    source = f" ({inputs.cloud_label})" if inputs.cloud_label else ""
    spot = (f"{price(inputs.spot_price)}/GPU-hour" if inputs.spot_gpu_hour_price is not None
            else f"{_g(inputs.spot_discount_pct)}% off = {price(inputs.spot_price)}/GPU-hour")
    lines += [
        f"work:  {_g(inputs.gpu_hours)} GPU-hours of the reference GPU",
        f"cloud: {inputs.cloud_gpus} GPUs × speed {_g(inputs.cloud_speed)} at {price(inputs.gpu_hour_price)}/GPU-hour{source}",
        f"       extras {usd(inputs.cloud_extras)} a run",
        f"spot:  {spot}",
        f"       {_g(inputs.interruptions_per_day)} interruptions a day of work, each {_g(inputs.lost_hours)} h lost"
        f" + {_g(inputs.restart_minutes)} min to restart",
        f"own:   {inputs.own_gpus} GPUs × speed {_g(inputs.own_speed)}, {usd(inputs.own_hardware_usd)} over"
        f" {_g(inputs.own_amortize_months)} months at {_g(inputs.own_utilisation_pct)}% utilisation",
        f"       {_g(inputs.own_power_kw)} kW at {price(inputs.kwh_usd)}/kWh",
        "",
        f"{'OPTION':<16} {'COST':>12} {'TIME':>9} {'INDEX':>7} {'BILLED':>9} {'$/H':>9}",
    ]
    for o in options:
        lines.append(f"{o.name:<16} {usd(o.cost):>12} {o.hours:>7,.1f} h {o.index:>7.2f} {o.billed_hours:>7,.1f} h"
                     f" {usd(o.hourly):>9}")
    spot_option = next(o for o in options if o.key == "spot")
    lines += [
        f"spot: {spot_option.interruptions:,.1f} interruptions expected; billed hours include redone work",
        "",
        INDEX_FORMULA,
        f"  {INDEX_MEANING}",
    ]
    if preset is not None and preset.published:
        table = ", ".join(f"{SHORT_NAMES[key]} ${cost:,.0f} / {_g(hours)} h" for key, cost, hours in preset.published)
        verdict = "reproduced exactly by these inputs" if reproduces(preset, options) else "not reproduced with these inputs"
        lines += [f"the guide's table: {table}", f"  {verdict}"]
    return "\n".join(lines) + "\n"


def run_cost(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None, *,
             make_console: Any = None) -> int:
    """``gpuconsole cost compare`` (or ``reconcile``, with ``make_console``). Returns the exit
    status (2 for a bad input, one line on stderr)."""
    if getattr(args, "cost_command", None) == "reconcile":
        from gpuconsole.cli.cost_reconcile import run_reconcile

        return run_reconcile(args, make_console, out, err)
    if getattr(args, "cost_command", None) == "clouds":
        from gpuconsole.cli.cost_clouds import run_clouds

        return run_clouds(args, make_console, out, err)
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        inputs, preset = inputs_from_args(args)
        options = compare(inputs)
    except CalculatorError as exc:
        where = "" if exc.field == COMBINATION else f"argument {FLAGS.get(exc.field, LABELS.get(exc.field, exc.field))}: "
        print(f"gpuconsole: error: {where}{exc.reason} (see gpuconsole cost compare --help)", file=err)
        return 2
    try:
        if args.cost_json:
            json.dump(document(inputs, options, preset, _given(args, "preset")), out, indent=2)
            out.write("\n")
        else:
            out.write(render_text(inputs, options, preset))
        out.flush()
    except BrokenPipeError:
        # The reader went away (``… --json | head``): not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0
