"""The demo world's measurements, each computed once: every page that shows a candidate reads the same answer.

Pages 00, 06, 08 and 10 judge the same K2.5 candidates. :func:`measure_demo` measures a drafter of the trained
world on one target the one way those pages show it (the world's :data:`~eaglekit.demo.prompts.MEASURED_PROMPTS`
prompts, continued for :data:`~eaglekit.demo.prompts.MAX_NEW_TOKENS` tokens, drafted to :data:`STEPS` so every
K a page judges, 1 to 4, comes from the same cycles), through the result cache: the first page to ask pays, the
others read the answer back (and say so), and no two pages can show two figures for one candidate.

Page 11 asks the same of long traces: :func:`measure_long` measures a candidate on the world's long prompts
(:func:`~eaglekit.demo.prompts.long_prompts`), :func:`demo_context_verdicts` judges the EAGLE-3 candidates at each
context of :data:`LONG_CONTEXTS` with the acceptance measured there, and :func:`demo_context_plan` plans one of them
by (batch size, context length) for the engines' schedules.
"""

from __future__ import annotations

from eaglekit.analysis.acceptance.measure import AcceptanceResult, measure_acceptance
from eaglekit.analysis.verdict import Verdicts, judge
from eaglekit.demo.trained import build_trained_demo
from eaglekit.demo.prompts import (LONG_BUCKETS, LONG_LENGTHS, MAX_NEW_TOKENS, MEASURED_PROMPTS, PROMPT_LENGTH,
                                   long_prompts, measurement_prompts)

#: the deepest K a page judges (page 06's K curve; the drafters were trained for 3)
STEPS = 4
#: the K2.5 candidates the pages judge, by the name the pages give them: three EAGLE-3 drafters and a DFlash block
#: drafter (measured through the block path of measure_acceptance; its cycle drafts in one forward, so the pages
#: judge it on the block cycle, eaglekit.block_scenario, and page 08 plans it with block_drafter=)
K25_CANDIDATES = {"warm start": "k25-warm", "scratch": "k25-scratch", "public MLA drafter": "k25-mla",
                  "DFlash": "k25-dflash"}


def measure_demo(world, drafter: str, target: str, *, aux_convention=None, progress: bool | None = None,
                 cache: bool | str = True) -> AcceptanceResult:
    """``drafter`` (a drafter of the trained ``world``, e.g. ``"k25-warm"``) on ``target`` (``"k2"`` or ``"k25"``),
    measured as every page shows it; ``aux_convention`` reads its aux ids the other way (page 06)."""
    return measure_acceptance(world.drafter(drafter), target=world.target(target),
                              prompts=measurement_prompts(world, target, MEASURED_PROMPTS), steps=STEPS,
                              max_new_tokens=MAX_NEW_TOKENS, aux_convention=aux_convention, progress=progress,
                              cache=cache)


def demo_candidates(world, *, progress: bool | None = None) -> dict[str, AcceptanceResult]:
    """Each K2.5 candidate of :data:`K25_CANDIDATES` measured on the K2.5 target (:func:`measure_demo`)."""
    return {label: measure_demo(world, name, "k25", progress=progress) for label, name in K25_CANDIDATES.items()}


#: the deployment every demo verdict is judged on (page 08's plan of the seed): its run without speculation (82 tok/s
#: at batch 1), its measured verify of 2 drafts (30 ms), K2.5 on 8 GPUs; the seed names no GPU model (8 PCIe GPUs),
#: so H20 is assumed, and no context, so 2048 tokens is; the seed's speculative run stays out (its cells belong
#: to the team's old drafter, not to these candidates)
SEED_BASELINE_RUN = (1, 0, None, None, None, 82.0)
SEED_VERIFY = ((1, 3, 30.0),)
SEED_TARGET, SEED_GPU, SEED_TP, SEED_CONTEXT = "kimi-k25-int4", "H20", 8, 2048


def demo_verdicts(world, *, batch: int = 1, progress: bool | None = False) -> Verdicts:
    """The verdict of each K2.5 candidate (:func:`demo_candidates`) on the seed's deployment at ``batch``
    (:func:`eaglekit.analysis.verdict.judge`): the block pages 00, 06, 08 and 10 open with. ``world``: the trained
    world, or its folder (built there on first use)."""
    if not hasattr(world, "drafter"):
        world = build_trained_demo(world, progress=progress)
    return judge(demo_candidates(world, progress=progress), costs=list(SEED_VERIFY), measured=[SEED_BASELINE_RUN],
                 target=SEED_TARGET, gpu=SEED_GPU, tp=SEED_TP, context=SEED_CONTEXT, batch=batch, max_steps=STEPS,
                 block_drafters={"DFlash": world.drafter(K25_CANDIDATES["DFlash"]) / "config.json"},
                 gpu_assumed=True, context_assumed=True)


#: the contexts page 11 judges and plans at: the chat-length requests' own length, then each long prompt length
#: (each inside the position bucket of its prompts' cycles, :data:`~eaglekit.demo.prompts.LONG_BUCKETS`)
LONG_CONTEXTS = (PROMPT_LENGTH + MAX_NEW_TOKENS, *LONG_LENGTHS)
#: the EAGLE-3 candidates page 11 judges by context (block drafters are measured by position, not yet judged so)
LONG_CANDIDATES = {label: name for label, name in K25_CANDIDATES.items() if label != "DFlash"}


def measure_long(world, drafter: str, target: str = "k25", *, progress: bool | None = None,
                 cache: bool | str = True) -> AcceptanceResult:
    """``drafter`` measured on ``target``'s long traces (:func:`~eaglekit.demo.prompts.long_prompts`: the measured
    pages' prompts, then prompts of 256 to 4,096 tokens, each continued for :data:`~eaglekit.demo.prompts.MAX_NEW_TOKENS` tokens) to :data:`STEPS`,
    through the result cache."""
    return measure_acceptance(world.drafter(drafter), target=world.target(target), prompts=long_prompts(world, target),
                              steps=STEPS, max_new_tokens=MAX_NEW_TOKENS, progress=progress, cache=cache)


def demo_long_profiles(world, *, progress: bool | None = False) -> dict:
    """Each EAGLE-3 K2.5 candidate's accept length by context position on the long traces, one bucket per prompt
    length (:data:`~eaglekit.demo.prompts.LONG_BUCKETS`), with its range (the 48 positions the world's drafters were
    trained on, and what their configs claim) for the figure."""
    import json

    from eaglekit.analysis.acceptance.positions import position_range
    from eaglekit.demo.trained import SEQ

    if not hasattr(world, "drafter"):
        world = build_trained_demo(world, progress=progress)
    out = {}
    for label, name in LONG_CANDIDATES.items():
        config = json.loads((world.drafter(name) / "config.json").read_text())
        out[label] = measure_long(world, name, progress=progress).by_position(
            LONG_BUCKETS, drafter_range=position_range(config, trained_length=SEQ))
    return out


def demo_context_verdicts(world, *, batch: int = 1, progress: bool | None = False):
    """Each EAGLE-3 K2.5 candidate judged at each of :data:`LONG_CONTEXTS` on the seed's deployment at ``batch``
    with the accept length measured at that context on the long traces
    (:func:`eaglekit.analysis.context_verdict.judge_by_context`): the block page 11 opens with."""
    from eaglekit.analysis.context_verdict import judge_by_context

    if not hasattr(world, "drafter"):
        world = build_trained_demo(world, progress=progress)
    results = {label: measure_long(world, name, progress=progress) for label, name in LONG_CANDIDATES.items()}
    return judge_by_context(results, LONG_CONTEXTS, LONG_BUCKETS, costs=list(SEED_VERIFY), measured=[SEED_BASELINE_RUN],
                            target=SEED_TARGET, gpu=SEED_GPU, tp=SEED_TP, batch=batch, max_steps=STEPS,
                            gpu_assumed=True)


def demo_context_plan(world, candidate: str = "public MLA drafter", *, batches=(1, 4, 16, 64),
                      progress: bool | None = False):
    """``candidate`` planned by (batch size, context length) on the seed's deployment: at each of
    :data:`LONG_CONTEXTS`, the acceptance measured there on the long traces
    (:func:`~eaglekit.analysis.serving.context_plan.plan_by_context`); its ``choices()`` feed the schedules."""
    from eaglekit.analysis.context_verdict import plan_from_buckets

    if not hasattr(world, "drafter"):
        world = build_trained_demo(world, progress=progress)
    result = measure_long(world, LONG_CANDIDATES[candidate], progress=progress)
    return plan_from_buckets(result, LONG_CONTEXTS, LONG_BUCKETS, max_steps=STEPS, what=candidate,
                             costs=list(SEED_VERIFY), measured=[SEED_BASELINE_RUN], target=SEED_TARGET, gpu=SEED_GPU,
                             tp=SEED_TP, batches=tuple(batches))
