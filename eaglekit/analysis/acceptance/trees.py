"""Accept length of tree drafts, for one or a grid of (steps, topk, draft tokens), beside the chain.

``measure_trees(drafter, trees=["6:10:60", "4:8:32"], target=..., prompts=...)`` runs one
:func:`~eaglekit.analysis.acceptance.measure.measure_acceptance` (the target's greedy continuations, the
chain's figures) and drafts the trees of every configuration from every continuation position on the
same features (:mod:`~eaglekit.analysis.acceptance.tree`). The grid shares the target's tokens, the
drafter's first pass and, per top-k, one tree growth up to its deepest configuration.

Cycles are simulated as for the chain (vLLM's convention: bonus token in, prefill token out): a cycle at
continuation offset ``i`` accepts the tree's accepted depth ``m(i)`` plus the bonus token, the next
starts at ``i + m(i) + 1``, the last is capped. ``topk = 1`` with ``n = s + 1`` is the chain, figure for
figure.

At temperature > 0 the tree is the same (both engines rank children by the drafter's untempered
probabilities); EAGLE (``evaluate_posterior``) and SGLang (``tree_speculative_sampling_target_only``)
then try a node's children in order and accept child ``c`` with the target's probability of ``c`` given
the siblings already rejected, which accepts some child with probability ``sum_c p(c)``, p the target's
distribution at that temperature (the drafter's q plays no part). ``expected_accept_length`` applies
that probability at every depth of the greedy path, on the greedy figure's cycles, as the chain's
expected figure does; at ``topk = 1`` it is therefore the engines' chain sampling (``p(draft)``), not
Leviathan's ``sum_v min(p, q)`` of the chain's ``expected_accept_length``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import astuple, dataclass, field
from typing import Any

import numpy as np

from eaglekit.analysis.acceptance.measure import (
    AcceptanceResult,
    SampleStats,
    _null_nan,
    acceptance_key_parts,
    measure_acceptance,
    summarise,
    with_cached,
)
from eaglekit.analysis.acceptance.tree import (
    TreeAttention,
    TreeConfig,
    check_attention,
    tree_configs,
    tree_sample_stats,
)
from eaglekit.core.errors import InputError
from eaglekit.analysis.acceptance.positions import CycleLog, PositionProfile, by_position
from eaglekit.core.records import register
from eaglekit.io.cache import cached_call
from eaglekit.core.render import html_table, text_table
from eaglekit.core.uncertainty import Interval


@dataclass(frozen=True)
class TreeResult:
    """One tree configuration's measured accept length (``to_json`` is one entry of ``trees[]``)."""

    steps: int
    topk: int
    draft_tokens: int
    accept_length: float
    interval: Interval
    generated_tokens: int
    cycles: int
    #: P(depth d accepted | depths 1..d-1 accepted), over every position; None where nothing conditions it
    per_depth_acceptance: tuple[float | None, ...]
    #: the accepted depth averaged over every continuation position (not only cycle starts)
    mean_accepted_depth: float
    #: share of cycles whose accepted path took a child other than its parent's best-scoring one
    left_first_child: float
    expected_accept_length: float | None = None
    expected_per_depth_acceptance: tuple[float | None, ...] | None = None
    #: the most the run's lengths allow: every cycle accepting all ``steps`` drafts (generated tokens over
    #: the fewest cycles, each prompt's last cycle cut short by its length)
    ceiling: float = field(default=float("nan"), compare=False)
    #: every cycle with the context length it starts at (:meth:`by_position`)
    cycle_log: CycleLog | None = field(default=None, repr=False, compare=False)

    def by_position(self, buckets: int | Sequence[int] = 8, *, break_even: float | None = None,
                    seed: int = 0, drafter_range=None) -> PositionProfile:
        """This configuration's accept length by the context length where each cycle starts
        (:func:`~eaglekit.analysis.acceptance.positions.by_position`)."""
        if self.cycle_log is None:
            raise InputError("this tree result kept no cycle positions: measure it again to read it by position.")
        return by_position(self.cycle_log, buckets=buckets, break_even=break_even, seed=seed,
                           drafter_range=drafter_range)

    @property
    def config(self) -> TreeConfig:
        return TreeConfig(self.steps, self.topk, self.draft_tokens)

    @property
    def at_ceiling(self) -> bool:
        """Whether the accept length is the most the run's lengths allow: longer continuations would be needed
        to tell this configuration from a deeper or wider one."""
        return bool(np.isfinite(self.ceiling)) and self.accept_length >= self.ceiling - 1e-9

    def to_json(self) -> dict[str, Any]:
        out = {"steps": self.steps, "topk": self.topk, "draft_tokens": self.draft_tokens,
               **self.interval.fields("accept_length"), "accept_length_interval": self.interval.method,
               "generated_tokens": self.generated_tokens, "cycles": self.cycles,
               "per_depth_acceptance": list(self.per_depth_acceptance),
               "mean_accepted_depth": self.mean_accepted_depth, "left_first_child": self.left_first_child,
               "ceiling_accept_length": self.ceiling, "at_ceiling": self.at_ceiling}
        if self.expected_accept_length is not None:
            out["expected_accept_length"] = self.expected_accept_length
            out["expected_per_depth_acceptance"] = list(self.expected_per_depth_acceptance or ())
        return out


def cycle_starts(matches: np.ndarray, generated: int, steps: int) -> list[int]:
    """Continuation offsets where the simulated cycles start (those of ``simulate_cycles``)."""
    out, i = [], 0
    while i < generated:
        out.append(i)
        i += min(int(matches[i]), steps) + 1
    return out


def summarise_tree(config: TreeConfig, stats: Sequence[tuple[SampleStats, np.ndarray]], *, seed: int = 0) -> TreeResult:
    """Pool one configuration's per-prompt counts (the chain's :func:`summarise`, plus the tree's own figures)."""
    samples = [s for s, _ in stats]
    main = summarise(samples, steps=config.steps, seed=seed)
    starts = [cycle_starts(s.matches, s.generated, config.steps) for s in samples]
    cycles = sum(len(x) for x in starts)
    left = sum(int(np.asarray(lf)[x].sum()) for (_, lf), x in zip(stats, starts))
    positions = sum(s.generated for s in samples)
    depth_sum = sum(float(np.minimum(s.matches, config.steps).sum()) for s in samples)
    fewest = sum(-(-s.generated // (config.steps + 1)) for s in samples if s.generated)
    interval = main["interval"] or Interval(main["accept_length"], None, None, "no interval")
    return TreeResult(
        steps=config.steps, topk=config.topk, draft_tokens=config.draft_tokens, accept_length=main["accept_length"],
        interval=interval, generated_tokens=main["generated_tokens"], cycles=main["cycles"],
        per_depth_acceptance=main["per_step_acceptance"],
        mean_accepted_depth=depth_sum / positions if positions else float("nan"),
        left_first_child=left / cycles if cycles else float("nan"),
        expected_accept_length=main["expected_accept_length"],
        expected_per_depth_acceptance=main["expected_acceptance"],
        ceiling=positions / fewest if fewest else float("nan"), cycle_log=main["cycle_log"])


@dataclass(frozen=True)
class TreeAcceptance:
    """The chain's :class:`AcceptanceResult` and every tree configuration's figures on the same prompts.

    ``to_json()`` is the chain's JSON plus ``tree_attention`` and ``trees[]`` (the serving plan reads
    ``steps``, ``topk``, ``draft_tokens``, ``accept_length``, ``accept_length_low``, ``accept_length_high``).
    When one tree was asked for (``--topk K --draft-tokens N``: :attr:`headline`), that tree is the headline: the
    top-level figures (and the text's first line) are the tree's, ``headline`` names it, and the chain measured
    beside it is under ``chain``."""

    #: the chain's record: an AcceptanceResult, or a DumpAcceptance from a training pipeline's dump
    result: Any
    attention: str
    trees: tuple[TreeResult, ...] = field(default_factory=tuple)

    def tree(self, steps: int, topk: int, draft_tokens: int) -> TreeResult:
        for t in self.trees:
            if (t.steps, t.topk, t.draft_tokens) == (steps, topk, draft_tokens):
                return t
        raise InputError(f"no tree {steps}:{topk}:{draft_tokens} was measured; measured: "
                         + ", ".join(t.config.label for t in self.trees))

    @property
    def headline(self) -> TreeResult | None:
        """The one tree asked for (a single configuration wider than a chain), else None (a grid: the chain heads)."""
        return self.trees[0] if len(self.trees) == 1 and self.trees[0].topk > 1 else None

    #: the chain's figures that a tree has no counterpart for: under ``chain`` only when a tree heads the JSON
    CHAIN_ONLY = ("accept_length_by_steps", "accept_length_by_convention", "accept_length_prefill_included",
                  "per_prompt_accept_length", "expected_acceptance", "expected_accept_length", "per_step_acceptance")

    def to_json(self) -> dict[str, Any]:
        chain = self.result.to_json()
        trees = [t.to_json() for t in self.trees]
        head = self.headline
        if head is None:
            return _null_nan({**chain, "tree_attention": self.attention, "trees": trees})
        top = {k: v for k, v in chain.items() if k not in self.CHAIN_ONLY}
        top.update(head.to_json())
        return _null_nan({**top, "headline": f"tree {head.config.label}", "chain": chain,
                          "tree_attention": self.attention, "trees": trees})

    def _headline_text(self) -> str:
        head = self.headline
        if head is None:
            return ""
        return (f"Accept length, tree {head.config.label} (steps:topk:draft tokens, {self.attention} attention): "
                f"{head.interval.text(3)}; the chain at K = {self.chain.steps}, measured beside it: "
                f"{self.chain.interval.text(3)} (vLLM convention, bonus token in, prefill token out)")

    def _headers(self) -> list[str]:
        h = ["steps", "topk", "draft tokens", "accept length", "95% interval", "mean depth", "left 1st child",
             "P(accept d | 1..d-1)"]
        return h + (["expected AL"] if any(t.expected_accept_length is not None for t in self.trees) else [])

    def _rows(self) -> list[list[str]]:
        rows = []
        for t in self.trees:
            i = t.interval
            length = f"{t.accept_length:.3f}" + (" ^" if t.at_ceiling else "")
            row = [str(t.steps), str(t.topk), str(t.draft_tokens), length,
                   f"{i.low:.3f}-{i.high:.3f}" if i.has_interval else "-", f"{t.mean_accepted_depth:.3f}",
                   f"{t.left_first_child:.1%}",
                   " ".join("-" if c is None else f"{c:.2f}" for c in t.per_depth_acceptance)]
            if t.expected_accept_length is not None:
                row.append(f"{t.expected_accept_length:.3f}")
            rows.append(row)
        return rows

    @property
    def chain(self) -> AcceptanceResult:
        """The chain's figures measured in the same run."""
        return getattr(self.result, "result", self.result)

    def _title(self) -> str:
        capped = ""
        if any(t.at_ceiling for t in self.trees):
            capped = ("; ^ at the ceiling the run's lengths allow (as few cycles as if every cycle accepted all its "
                      "steps): longer continuations would tell these apart")
        return (f"Tree drafts ({self.attention} attention; chain K = {self.chain.steps}: "
                f"{self.chain.accept_length:.3f}; vLLM convention, bonus token in, prefill token out{capped})")

    def __str__(self) -> str:
        first = self._headline_text() + "\n\n" if self.headline is not None else ""
        return first + str(self.result) + "\n\n" + text_table(self._headers(), self._rows(), title=self._title())

    def _repr_html_(self) -> str:
        first = f"<p><b>{html.escape(self._headline_text())}</b></p>" if self.headline is not None else ""
        return ("<div>" + first + self.result._repr_html_()
                + html_table(self._headers(), self._rows(), caption=self._title()) + "</div>")


register(TreeAcceptance, TreeResult)


def measure_trees(drafter, *, trees, tree_attention: TreeAttention = "ancestors", steps: int | None = None,
                  seed: int = 0, cache: bool | str = True, cache_dir=None, **kwargs) -> TreeAcceptance:
    """Measure tree drafts ``trees`` (``"S:K:N,..."`` or a list of configurations) and the chain with
    ``steps`` (default: the deepest tree's) in one run; every other keyword goes to
    :func:`~eaglekit.analysis.acceptance.measure.measure_acceptance` (``target=`` and ``prompts=``, or
    ``hidden_states=``). ``tree_attention``: ``"ancestors"`` (EAGLE) or ``"sglang-slots"`` (SGLang).
    ``cache``/``cache_dir``: the result cache, as for ``measure_acceptance``."""
    check_attention(tree_attention)
    configs = tree_configs(trees)

    def parts(store):
        return {**acceptance_key_parts(store, drafter, kwargs), "trees": [list(astuple(c)) for c in configs],
                "tree_attention": tree_attention, "chain_steps": steps, "seed": seed}
    return cached_call("trees", TREES_CODE_VERSION, None if kwargs.get("keep_samples") else parts,
                       lambda: _measure_trees(drafter, configs, tree_attention, steps, seed, kwargs),
                       cache=cache, cache_dir=cache_dir, stamp=with_cached)


#: the version of the tree-draft code a cached answer was computed by (bump with any change to what it computes)
TREES_CODE_VERSION = 2   # 2: tree results keep their cycle positions (cycle_log)


def _measure_trees(drafter, configs, tree_attention, steps, seed, kwargs) -> TreeAcceptance:
    temperature = float(kwargs.get("temperature", 0.0) or 0.0)
    collected: dict[TreeConfig, list] = {c: [] for c in configs}

    def on_sample(model, aux, ids, tgt, plen, logits):
        got = tree_sample_stats(model, aux, ids, tgt, plen, configs, attention=tree_attention,
                                temperature=temperature, target_logits=logits)
        for c in configs:
            collected[c].extend(got[c])

    chain_steps = steps if steps is not None else max(c.steps for c in configs)
    result = measure_acceptance(drafter, steps=chain_steps, on_sample=on_sample, cache=False, **kwargs)
    return TreeAcceptance(result, tree_attention,
                          tuple(summarise_tree(c, collected[c], seed=seed) for c in configs))
