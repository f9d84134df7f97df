"""``--by-position N`` of ``eaglekit acceptance``: the accept length by context position after the figure
(:mod:`eaglekit.analysis.acceptance.positions`), in text and in JSON (``by_position``)."""

from __future__ import annotations

import argparse
from typing import Any

from eaglekit.cli.common import emit, print_json


def add_position_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("accept length by context position")
    g.add_argument("--by-position", type=_buckets, default=None, metavar="N|E1,E2,...",
                   help="also print the accept length in N equal-width buckets of the context length at which each "
                        "cycle starts (or buckets with these edges), with intervals; JSON by_position")
    g.add_argument("--break-even", type=float, default=None, metavar="AL",
                   help="with --by-position: the break-even accept length; each bucket gets GO / NO-GO / TOO CLOSE "
                        "TO CALL and the position where the drafter stops paying is named")
    g.add_argument("--trained-length", type=int, default=None, metavar="TOKENS",
                   help="with --by-position: the sequence length the drafter was trained on, when its config does "
                        "not say it")


def _buckets(text: str) -> int | list[int]:
    try:
        parts = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--by-position takes a bucket count or comma-separated positions, "
                                         f"got {text!r}") from None
    if len(parts) == 1:
        if parts[0] < 1:
            raise argparse.ArgumentTypeError(f"--by-position needs at least 1 bucket, got {parts[0]}")
        return parts[0]
    return parts


def emit_with_positions(record: Any, args: argparse.Namespace) -> None:
    """``record`` as :func:`~eaglekit.cli.common.emit` prints it; with ``--by-position``, the accept length by
    context position of the measurement it holds (a tree run's headline tree, a dump's ``.result``) after it
    (text), or under ``by_position`` (JSON)."""
    if getattr(args, "by_position", None) is None:
        emit(record, args)
        return
    result = getattr(record, "headline", None) or record   # a tree run: its headline tree's cycles
    while not hasattr(result, "cycle_log"):
        result = result.result
    profile = result.by_position(args.by_position, break_even=args.break_even,
                                 drafter_range=drafter_range(args.drafter, args))
    if args.json:
        extra = {}
        if len(getattr(result, "cycle_logs", ())) >= result.steps:  # every K's buckets: the plan's accept lengths
            from eaglekit.analysis.context_verdict import position_json

            extra = {"by_position_by_steps": position_json(result, args.by_position)["by_position_by_steps"]}
        print_json({**record.to_json(), "by_position": profile.to_json(), **extra})
    else:
        print(record)
        print()
        print(profile)


def drafter_range(drafter: str, args: argparse.Namespace):
    """The drafter's :class:`~eaglekit.analysis.acceptance.positions.PositionRange` from its config.json (an
    unreadable config gives only ``--trained-length``: the figure is measured all the same)."""
    from eaglekit.analysis.acceptance.positions import PositionRange, position_range
    from eaglekit.core.errors import EaglekitError
    from eaglekit.io.reader import load_config

    try:
        config = load_config(drafter, kind="drafter", endpoint=args.endpoint, timeout=args.timeout)
    except EaglekitError:
        return PositionRange(trained_length=args.trained_length)
    return position_range(config, trained_length=args.trained_length)
