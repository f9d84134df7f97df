"""eaglekit: can this EAGLE-3 drafter serve, or be fine-tuned for, that target model?

The package is built in floors, each a subpackage that imports only the floors below it (checked by
import-linter on every ``make test``; docs/architecture.md draws it):

=====================  ====================================================================
``eaglekit.cli``       the ``eaglekit`` command, the report runner and the JupyterLab launcher
``eaglekit.view``      plotly figures, the calculator widget, rendered report pages
``eaglekit.demo``      the synthetic demo world and its loopback Hub and file servers
``eaglekit.analysis``  one room per feature: compat/ (compat, check, export), similarity/, drift/,
                       acceptance/, serving/, live/ (an engine's counters read live), search,
                       investigation
``eaglekit.io``        locations, byte sources (local, Hub, HTTP, SSH), the reader, inventories,
                       what rooms read about a drafter (drafter.py), hidden-state dumps (dumps/)
``eaglekit.core``      pure: headers, configs, vocabulary maps, layer ids, speculative maths
=====================  ====================================================================

Everything the notebooks use is exported here. The names load lazily (PEP 562), so ``import eaglekit``
and the CLI start fast; torch, plotly, ipywidgets and the Hub client load with the function that uses
them. ``_EXPORTS`` and the ``TYPE_CHECKING`` block below name the same things (a test keeps them in step).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from eaglekit.core.errors import EaglekitError

from eaglekit.core.version import __version__

#: public name -> module (below ``eaglekit``) that defines it
_EXPORTS = {
    "parse_location": "io.location",
    "read_inventory": "io.reader", "open_checkpoint": "io.reader", "Checkpoint": "io.reader", "load_config": "io.reader",
    "Inventory": "io.inventory", "compare_inventories": "io.inventory",
    "open_dump": "io.dumps.native",
    "open_training_dump": "io.dumps.detect",
    "normalize_config": "core.configs.config",
    "diff_configs": "core.configs.diff",
    "Scenario": "core.speedup.specmath", "estimate": "core.speedup.specmath", "AcceptanceMetrics": "core.speedup.specmath",
    "Account": "core.serving.account",
    "Interval": "core.uncertainty", "verdict": "core.uncertainty", "bootstrap_ratio": "core.uncertainty",
    "bootstrap_difference": "core.uncertainty", "accept_length_gain": "analysis.acceptance.measure",
    "plan": "analysis.serving.plan", "ServingPlan": "analysis.serving.plan",
    "PlanWidget": "view.serving", "plan_throughput_figure": "view.serving", "plan_steps_figure": "view.serving",
    "plan_grid_figure": "view.serving",
    "compat": "analysis.compat.pair", "CompatReport": "analysis.compat.pair",
    "check": "analysis.compat.check", "CheckReport": "analysis.compat.check",
    "export": "analysis.compat.export", "ExportResult": "analysis.compat.export",
    "similarity": "analysis.similarity.measure",
    "SimilarityReport": "analysis.similarity.report",
    "find_drafters": "analysis.search",
    "drift": "analysis.drift.measure",
    "DriftReport": "analysis.drift.report",
    "hidden_drift": "analysis.drift.hidden", "HiddenDrift": "analysis.drift.hidden",
    "measure_acceptance": "analysis.acceptance.measure", "AcceptanceResult": "analysis.acceptance.measure",
    "DraftModel": "analysis.draft",
    "load_target_model": "analysis.acceptance.target", "dump_hidden_states": "analysis.acceptance.target",
    "conclude_acceptance": "analysis.acceptance.conclusion", "compare_readings": "analysis.acceptance.conclusion",
    "measure_dump": "analysis.acceptance.dumps", "DumpAcceptance": "analysis.acceptance.dump_result",
    "measure_trees": "analysis.acceptance.trees", "TreeAcceptance": "analysis.acceptance.trees",
    "TreeResult": "analysis.acceptance.trees", "TreeConfig": "analysis.acceptance.tree",
    "acceptance_curve": "analysis.acceptance.curve", "AcceptanceCurve": "analysis.acceptance.curve_result",
    "conclude": "analysis.investigation",
    "Calculator": "view.calculator",
    "heatmap": "view.figures", "overview": "view.figures",
    "drift_map": "view.drift_figures", "drafter_view": "view.drift_figures",
    "accept_length_vs_steps": "view.acceptance_figures", "per_step_acceptance": "view.acceptance_figures", "per_prompt_spread": "view.acceptance_figures",
    "steps_table": "view.acceptance_figures", "break_even_by_steps": "view.acceptance_figures",
    "accept_length_curve": "view.acceptance_figures", "accept_length_by_position": "view.acceptance_figures",
    "build_demo": "demo.world",
    "build_trained_demo": "demo.trained",
    "trained_dumps": "demo.dumps", "write_training_dumps": "demo.dumps", "loss_masks_of": "demo.dumps",
    "measurement_prompts": "demo.prompts", "long_prompts": "demo.prompts",
    "measure_long": "demo.candidates", "demo_context_verdicts": "demo.candidates",
    "demo_long_profiles": "demo.candidates", "demo_context_plan": "demo.candidates",
    "judge_by_context": "analysis.context_verdict", "ContextVerdicts": "analysis.context_verdict",
    "plan_from_buckets": "analysis.context_verdict", "plan_by_context": "analysis.serving.context_plan",
    "ContextPlan": "analysis.serving.context_plan", "position_range": "analysis.acceptance.positions",
    "PositionProfile": "analysis.acceptance.positions",
    "measure_demo": "demo.candidates", "demo_candidates": "demo.candidates", "demo_verdicts": "demo.candidates",
    "judge": "analysis.verdict", "Verdicts": "analysis.verdict", "CandidateVerdict": "analysis.verdict",
    "block_scenario": "core.serving.block",
    "HubServer": "demo.hubserver",
    "serve_demo_hub": "demo.shelf",
    "read_tokenizer": "io.tokens.tokenizer", "tokenizer_diff": "io.tokens.tokenizer", "TokenizerDiff": "core.tokens.diff",
    "recommend_map": "core.tokens.coverage", "coverage": "core.tokens.coverage", "Coverage": "core.tokens.coverage",
    "compare_templates": "analysis.acceptance.templates", "TemplateComparison": "analysis.acceptance.templates",
    "measure_with_template": "analysis.acceptance.templates",
    "vocab_coverage": "analysis.acceptance.coverage", "traffic_tokens": "analysis.acceptance.coverage",
    "write_vocab_map": "analysis.acceptance.coverage",
    "build_token_demo": "demo.tokens",
    "read_live": "analysis.live.read", "read_live_log": "analysis.live.read", "read_live_series": "analysis.live.read",
    "LiveSeries": "analysis.live.read", "LiveReading": "core.serving.live", "parse_metrics": "core.serving.live",
    "compare_live": "analysis.live.compare", "LiveComparison": "analysis.live.compare",
    "LiveWidget": "view.live", "live_readings_figure": "view.live",
    "serve_metrics_replay": "demo.metricsserver", "MetricsReplayServer": "demo.metricsserver",
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


if TYPE_CHECKING:  # for type checkers and IDEs: the same names as _EXPORTS
    from eaglekit.io.location import parse_location
    from eaglekit.io.reader import Checkpoint, load_config, open_checkpoint, read_inventory
    from eaglekit.io.inventory import compare_inventories, Inventory
    from eaglekit.io.dumps.native import open_dump
    from eaglekit.io.dumps.detect import open_training_dump
    from eaglekit.core.configs.config import normalize_config
    from eaglekit.core.configs.diff import diff_configs
    from eaglekit.core.speedup.specmath import AcceptanceMetrics, estimate, Scenario
    from eaglekit.core.serving.account import Account
    from eaglekit.core.uncertainty import Interval, bootstrap_difference, bootstrap_ratio, verdict
    from eaglekit.analysis.acceptance.measure import accept_length_gain
    from eaglekit.analysis.serving.plan import ServingPlan, plan
    from eaglekit.view.serving import PlanWidget, plan_grid_figure, plan_steps_figure, plan_throughput_figure
    from eaglekit.analysis.compat.pair import compat, CompatReport
    from eaglekit.analysis.compat.check import check, CheckReport
    from eaglekit.analysis.compat.export import export, ExportResult
    from eaglekit.analysis.similarity.measure import similarity
    from eaglekit.analysis.similarity.report import SimilarityReport
    from eaglekit.analysis.search import find_drafters
    from eaglekit.analysis.drift.measure import drift
    from eaglekit.analysis.drift.report import DriftReport
    from eaglekit.analysis.drift.hidden import hidden_drift, HiddenDrift
    from eaglekit.analysis.acceptance.measure import AcceptanceResult, measure_acceptance
    from eaglekit.analysis.draft import DraftModel
    from eaglekit.analysis.acceptance.target import dump_hidden_states, load_target_model
    from eaglekit.analysis.acceptance.conclusion import compare_readings, conclude_acceptance
    from eaglekit.analysis.acceptance.dumps import measure_dump
    from eaglekit.analysis.acceptance.dump_result import DumpAcceptance
    from eaglekit.analysis.acceptance.trees import TreeAcceptance, TreeResult, measure_trees
    from eaglekit.analysis.acceptance.tree import TreeConfig
    from eaglekit.analysis.acceptance.curve import acceptance_curve
    from eaglekit.analysis.acceptance.curve_result import AcceptanceCurve
    from eaglekit.analysis.investigation import conclude
    from eaglekit.view.calculator import Calculator
    from eaglekit.view.figures import heatmap, overview
    from eaglekit.view.drift_figures import drafter_view, drift_map
    from eaglekit.view.acceptance_figures import (
        accept_length_curve,
        accept_length_by_position,
        accept_length_vs_steps,
        break_even_by_steps,
        per_prompt_spread,
        per_step_acceptance,
        steps_table,
    )
    from eaglekit.demo.world import build_demo
    from eaglekit.demo.trained import build_trained_demo
    from eaglekit.demo.dumps import loss_masks_of, trained_dumps, write_training_dumps
    from eaglekit.demo.prompts import long_prompts, measurement_prompts
    from eaglekit.demo.candidates import (demo_candidates, demo_context_plan, demo_context_verdicts,
                                          demo_long_profiles, demo_verdicts, measure_demo, measure_long)
    from eaglekit.analysis.context_verdict import ContextVerdicts, judge_by_context, plan_from_buckets
    from eaglekit.analysis.serving.context_plan import ContextPlan, plan_by_context
    from eaglekit.analysis.acceptance.positions import PositionProfile, position_range
    from eaglekit.analysis.verdict import CandidateVerdict, Verdicts, judge
    from eaglekit.core.serving.block import block_scenario
    from eaglekit.demo.hubserver import HubServer
    from eaglekit.demo.shelf import serve_demo_hub
    from eaglekit.io.tokens.tokenizer import read_tokenizer, tokenizer_diff
    from eaglekit.core.tokens.diff import TokenizerDiff
    from eaglekit.core.tokens.coverage import Coverage, coverage, recommend_map
    from eaglekit.analysis.acceptance.templates import compare_templates, measure_with_template, TemplateComparison
    from eaglekit.analysis.acceptance.coverage import traffic_tokens, vocab_coverage, write_vocab_map
    from eaglekit.demo.tokens import build_token_demo
    from eaglekit.analysis.live.read import LiveSeries, read_live, read_live_log, read_live_series
    from eaglekit.core.serving.live import LiveReading, parse_metrics
    from eaglekit.analysis.live.compare import compare_live, LiveComparison
    from eaglekit.view.live import live_readings_figure, LiveWidget
    from eaglekit.demo.metricsserver import MetricsReplayServer, serve_metrics_replay
