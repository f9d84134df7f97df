"""Answers: verdicts and measurements built on the reader.

Compatibility (:mod:`.compat`), streamed weight similarity (:mod:`.similarity` with its plan and
records), Hub search (:mod:`.search`) and the investigation's generated conclusion (:mod:`.conclusion`).
Records here render themselves as text and HTML tables but never draw plots. May import
:mod:`eaglekit.io` and :mod:`eaglekit.core`.
"""
