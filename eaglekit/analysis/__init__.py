"""Answers: verdicts and measurements built on the reader, one room (subpackage) per feature.

=====================  ==========================================================================
``compat/``            compat of two drafters (pair.py), pre-serving check (check.py), warm-start export
``similarity/``        streamed weight similarity of two drafters (measure, plan, report)
``drift/``             target drift: quantised weights (measure, dequant, plan, stats, report), hidden states
``acceptance/``        accept length measured offline (measure, draft_model, target, conclusion)
``search.py``          EAGLE-3 drafters on the Hub, by config
``investigation.py``   notebook 00's generated conclusion
=====================  ==========================================================================

Each room's entry points are exported by the package root (``eaglekit.compat``, ``eaglekit.similarity``,
...). Records here render themselves as text and HTML tables but never draw plots. May import
:mod:`eaglekit.io` and :mod:`eaglekit.core`; a room never imports another room's internals (shared
drafter reads live in :mod:`eaglekit.io.drafter`).
"""
