"""Serving-plan room: :func:`~.plan.plan` joins a drafter's measured per-step acceptance to a cost model of the
target's forward (fitted to measurements, or estimated from the target's config, its checkpoint header and a GPU
table) and returns a :class:`~.plan.ServingPlan`: the best draft steps per batch size, where speculation stops
paying, vLLM's schedule and SGLang's flags. :mod:`.target` reads the target's shape by range.

The entry points are exported by the package root (``eaglekit.plan``, ``eaglekit.ServingPlan``); this
``__init__`` re-exports nothing, so ``eaglekit.analysis.serving.plan`` always names the module.
"""
