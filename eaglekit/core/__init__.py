"""The ground floor, pure: bytes and dicts in, typed records out. No I/O, no torch, plotly or Hub client
at import (numpy only where arrays are the subject); imports nothing of eaglekit above it.

Rooms, named like the analysis rooms above them where the concern is the same:

=================  ===========================================================================
``checkpoint/``    safetensors headers, dtypes and tensor names (header, tensors, names)
``configs/``       config normalisation and diff, aux layer ids and what each engine release feeds,
                   what loading a target would do (config, diff, layers, engine_readings, aux_view,
                   loadable)
``tokens/``        vocabulary maps (d2t/t2d), tokenizer files and their diff, chat templates, coverage
``speedup/``       speculative-decoding closed forms and their Monte Carlo check (specmath, simulate)
``serving/``       the throughput account, the cost model of a target forward, the serving plan's maths
                   and its inputs, published target configs; builds on ``speedup/`` and ``configs/``
``acceptance/``    the pure half of accept-length measurement (prompt files)
=================  ===========================================================================

At the top only what every room shares: the error types (:mod:`.errors`), records that show themselves
(:mod:`.render`), estimates with intervals and the GO / NO-GO / TOO CLOSE TO CALL verdict
(:mod:`.uncertainty`), bounded JSON (:mod:`.safejson`), redaction (:mod:`.redact`), the version and the
garbage-collector pause (:mod:`.gcpause`). Rooms import each other only in the order the import-linter
contract in pyproject.toml states.
"""
