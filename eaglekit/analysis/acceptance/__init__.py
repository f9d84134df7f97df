"""Accept-length room: :func:`~.measure.measure_acceptance` drafts with the EAGLE-3 forward pass
(:mod:`.draft_model`) against a target's greedy continuations, from a target transformers runs
(:mod:`.target`) or from hidden-state dumps (:mod:`eaglekit.io.dumps`); :mod:`.conclusion` turns
measurements into a go/no-go. Torch loads with the modules that compute, so this package's ``__init__``
imports none of them.
"""
