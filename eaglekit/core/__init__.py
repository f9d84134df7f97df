"""The ground floor, pure: bytes and dicts in, typed records out.

Safetensors headers (:mod:`.header`, :mod:`.tensors`), config normalisation and diff (:mod:`.config`,
:mod:`.configdiff`), the d2t/t2d vocabulary map (:mod:`.vocab`), aux layer ids (:mod:`.layers`), tensor
names (:mod:`.names`), speculative-decoding maths (:mod:`.specmath`, :mod:`.simulate`), plain text/HTML
formatting for records that show themselves (:mod:`.render`), redaction (:mod:`.redact`) and the error
types (:mod:`.errors`). Imports nothing else of eaglekit, does no I/O, and pulls no torch, plotly or Hub
client at import (numpy only where arrays are the subject).
"""
