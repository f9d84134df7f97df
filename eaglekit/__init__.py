"""eaglekit: can this EAGLE-3 drafter serve, or be fine-tuned for, that target model?

The public names below load lazily (PEP 562), so ``import eaglekit`` and the CLI start fast; torch,
plotly, ipywidgets and the Hub client are imported only by the functions that use them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .errors import EaglekitError

__version__ = "0.1.0"

#: public name -> module that defines it
_EXPORTS = {
    "read_inventory": "reader", "open_checkpoint": "reader", "Checkpoint": "reader",
    "Inventory": "inventory", "parse_location": "location",
    "build_demo": "demo", "compare_inventories": "names",
    "normalize_config": "config", "diff_configs": "configdiff",
    "compat": "compat", "CompatReport": "compat",
    "similarity": "similarity", "SimilarityReport": "similarity_report",
    "find_drafters": "search",
    "Calculator": "calculator",
    "HubServer": "hubserver",
}

__all__ = ["EaglekitError", "__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'eaglekit' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # for type checkers and IDEs
    from .calculator import Calculator
    from .compat import CompatReport, compat
    from .config import normalize_config
    from .configdiff import diff_configs
    from .demo import build_demo
    from .hubserver import HubServer
    from .inventory import Inventory
    from .location import parse_location
    from .names import compare_inventories
    from .reader import Checkpoint, open_checkpoint, read_inventory
    from .search import find_drafters
    from .similarity import similarity
    from .similarity_report import SimilarityReport
