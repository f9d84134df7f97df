"""Presentation: plotly figures drawn from analysis records (:mod:`.figures`, :mod:`.drift_figures`), the
calculator (:mod:`.calculator`, an anywidget computing in the browser) and the rendered report pages (:mod:`.report`).
May import :mod:`eaglekit.analysis`, :mod:`eaglekit.io` and :mod:`eaglekit.core`; never the demo.
"""
