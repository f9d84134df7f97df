"""Options several subcommands share."""

from __future__ import annotations

import argparse


def add_hub_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", default=None, metavar="URL",
                   help="Hub endpoint for hf:// locations (default: $HF_ENDPOINT or https://huggingface.co); "
                        "the token comes from $HF_TOKEN or your huggingface login, never from the command line")
