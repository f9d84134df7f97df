"""Answers: verdicts and measurements built on the reader.

Compatibility of two drafters (:mod:`.compat`), pre-serving checks of one (:mod:`.check`), the
warm-start checkpoint writer (:mod:`.export`), streamed weight similarity (:mod:`.similarity` with its plan and
records), Hub search (:mod:`.search`) and the investigation's generated conclusion (:mod:`.conclusion`).
Records here render themselves as text and HTML tables but never draw plots. May import
:mod:`eaglekit.io` and :mod:`eaglekit.core`.
"""
