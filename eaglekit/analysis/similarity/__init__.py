"""Weight similarity room: :func:`similarity` (:mod:`.measure`) streams two drafters block by block;
:mod:`.plan` decides what is compared, :mod:`.report` holds the records. Figures are in :mod:`eaglekit.view.figures`.
"""

from __future__ import annotations

from eaglekit.analysis.similarity.measure import similarity
from eaglekit.analysis.similarity.report import SimilarityReport

__all__ = ["SimilarityReport", "similarity"]
