"""Presentation: plotly figures drawn from analysis records (:mod:`.figures`), the ipywidgets
calculator (:mod:`.calculator`) and the rendered, self-contained report pages (:mod:`.report`).
May import :mod:`eaglekit.analysis`, :mod:`eaglekit.io` and :mod:`eaglekit.core`; never the demo.
"""
