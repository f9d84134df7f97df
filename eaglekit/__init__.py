"""eaglekit: can this EAGLE-3 drafter serve, or be fine-tuned for, that target model?

The package is built in floors, each a subpackage that imports only the floors below it (checked by
import-linter on every ``make test``, see ``.importlinter``):

=====================  ====================================================================
``eaglekit.cli``       the ``eaglekit`` command, the report runner and the JupyterLab launcher
``eaglekit.view``      plotly figures, the calculator widget, rendered report pages
``eaglekit.demo``      the synthetic demo world and its loopback Hub and file servers
``eaglekit.analysis``  verdicts and measurements: compat, similarity, search, conclusions
``eaglekit.io``        locations, byte sources (local, Hub, HTTP, SSH), the reader, inventories
``eaglekit.core``      pure: headers, configs, vocabulary maps, layer ids, speculative maths
=====================  ====================================================================

The public names below load lazily (PEP 562), so ``import eaglekit`` and the CLI start fast; torch,
plotly, ipywidgets and the Hub client are imported only by the functions that use them. Module paths
of the flat layout that preceded the floors (``eaglekit.compat``, ``eaglekit.reader``, ...) still
import, as aliases of the modules' new homes (:data:`_MOVED`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
from typing import TYPE_CHECKING

from eaglekit.core.errors import EaglekitError

__version__ = "0.1.0"

#: public name -> module that defines it
_EXPORTS = {
    "read_inventory": "io.reader", "open_checkpoint": "io.reader", "Checkpoint": "io.reader",
    "Inventory": "io.inventory", "parse_location": "io.location",
    "build_demo": "demo.world", "compare_inventories": "io.inventory",
    "normalize_config": "core.config", "diff_configs": "core.configdiff",
    "compat": "analysis.compat", "CompatReport": "analysis.compat",
    "check": "analysis.check", "CheckReport": "analysis.check",
    "export": "analysis.export", "ExportResult": "analysis.export",
    "similarity": "analysis.similarity", "SimilarityReport": "analysis.similarity_report",
    "find_drafters": "analysis.search",
    "drift": "analysis.drift", "DriftReport": "analysis.drift_report",
    "hidden_drift": "analysis.hidden_drift", "HiddenDrift": "analysis.hidden_drift",
    "Calculator": "view.calculator",
    "HubServer": "demo.hubserver",
    "measure_acceptance": "analysis.acceptance", "AcceptanceResult": "analysis.acceptance",
    "DraftModel": "analysis.draft_model", "load_target": "analysis.target_features",
    "dump_hidden_states": "analysis.target_features", "open_dump": "io.hidden_states",
    "build_trained_demo": "demo.trained",
    "Account": "core.account",
}

#: module path of the flat layout -> its home now (kept importable for notebooks and scripts)
_MOVED = {
    "errors": "core.errors", "render": "core.render", "header": "core.header", "tensors": "core.tensors",
    "config": "core.config", "configdiff": "core.configdiff", "vocab": "core.vocab", "layers": "core.layers",
    "names": "core.names", "specmath": "core.specmath", "simulate": "core.simulate",
    "location": "io.location", "reader": "io.reader", "inventory": "io.inventory", "sources": "io.sources",
    "compat": "analysis.compat", "similarity": "analysis.similarity", "similarity_plan": "analysis.similarity_plan",
    "similarity_report": "analysis.similarity_report", "search": "analysis.search", "conclusion": "analysis.conclusion",
    "figures": "view.figures", "calculator": "view.calculator", "report": "view.report",
    "demo_hub": "demo.shelf", "hubserver": "demo.hubserver", "fileserver": "demo.fileserver", "lab": "cli.lab",
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


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes ``import eaglekit.<old>[.<sub>]`` return the module at its new home (the same object, so
    monkeypatching either name patches both)."""

    def find_spec(self, fullname, path=None, target=None):
        head, _, rest = fullname.partition(".")
        if head != __name__ or not rest:
            return None
        first, _, tail = rest.partition(".")
        if first not in _MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        first, _, tail = spec.name.split(".", 1)[1].partition(".")
        target = f"{__name__}.{_MOVED[first]}" + (f".{tail}" if tail else "")
        module = importlib.import_module(target)
        self._real_spec = getattr(module, "__spec__", None)
        return module

    def exec_module(self, module):
        module.__spec__ = self._real_spec  # the import system stamped the alias's spec on it


class _Package(types.ModuleType):
    """Keeps a public function (``eaglekit.compat``) from being replaced by the alias module of the same
    old name when someone imports ``eaglekit.compat`` as a module."""

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and name in _MOVED and name in _EXPORTS:
            return
        super().__setattr__(name, value)


sys.meta_path.insert(0, _MovedModules())
sys.modules[__name__].__class__ = _Package


if TYPE_CHECKING:  # for type checkers and IDEs
    from eaglekit.analysis.compat import CompatReport, compat
    from eaglekit.analysis.check import CheckReport, check
    from eaglekit.analysis.export import ExportResult, export
    from eaglekit.analysis.search import find_drafters
    from eaglekit.analysis.drift import drift
    from eaglekit.analysis.drift_report import DriftReport
    from eaglekit.analysis.hidden_drift import HiddenDrift, hidden_drift
    from eaglekit.analysis.similarity import similarity
    from eaglekit.analysis.similarity_report import SimilarityReport
    from eaglekit.core.config import normalize_config
    from eaglekit.core.configdiff import diff_configs
    from eaglekit.io.inventory import compare_inventories
    from eaglekit.demo.hubserver import HubServer
    from eaglekit.demo.world import build_demo
    from eaglekit.io.inventory import Inventory
    from eaglekit.io.location import parse_location
    from eaglekit.io.reader import Checkpoint, open_checkpoint, read_inventory
    from eaglekit.view.calculator import Calculator
    from eaglekit.analysis.acceptance import AcceptanceResult, measure_acceptance
    from eaglekit.analysis.draft_model import DraftModel
    from eaglekit.analysis.target_features import dump_hidden_states, load_target
    from eaglekit.demo.trained import build_trained_demo
    from eaglekit.io.hidden_states import open_dump
    from eaglekit.core.account import Account
