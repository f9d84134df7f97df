"""Answers: verdicts and measurements built on the reader.

Compatibility of two drafters (:mod:`.compat`), pre-serving checks of one (:mod:`.check`), the
warm-start checkpoint writer (:mod:`.export`), streamed weight similarity (:mod:`.similarity` with its plan and
records), Hub search (:mod:`.search`), the investigation's generated conclusion (:mod:`.conclusion`), and target
drift (:mod:`.drift` over quantised weights read by :mod:`.dequant`, with its plan, statistics, records
and the hidden-state comparison :mod:`.hidden_drift`), and the accept length measured offline (:mod:`.acceptance`
over the EAGLE-3 draft forward :mod:`.draft_model` and a target run by :mod:`.target_features`).
Records here render themselves as text and HTML tables but never draw plots. May import
:mod:`eaglekit.io` and :mod:`eaglekit.core`.
"""
