"""After the deploy: the engine's own acceptance read live (:func:`~.read.read_live`, two scrapes of its
``/metrics`` over a window, or its log), and beside eaglekit's offline figure (:func:`~.compare.compare_live`:
both intervals, the gap with a verdict, and the known causes of a gap checked where they can be).

Imports the core (:mod:`eaglekit.core.serving.live` holds the parsing and the arithmetic) and :mod:`eaglekit.io`
(the guarded fetch); no other analysis room. This ``__init__`` re-exports nothing.
"""
