"""Compatibility room: can a drafter serve a target, or initialise another drafter?

:func:`compat` (:mod:`.pair`) judges two drafters; :func:`check` (:mod:`.check`) checks one drafter
before serving; :func:`export` (:mod:`.export`) writes the warm-start checkpoint. What they read about a
drafter (vocabulary map, the target's rows, the target itself) lives in :mod:`eaglekit.io.drafter`.

The entry points are exported by the package root (``eaglekit.compat``, ``eaglekit.check``,
``eaglekit.export``); this ``__init__`` re-exports nothing, so ``eaglekit.analysis.compat.check`` always
names the module.
"""
