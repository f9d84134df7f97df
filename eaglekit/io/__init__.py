"""Byte I/O: where checkpoints live and how their bytes are fetched.

One location grammar (:mod:`.location`), sources that only fetch byte ranges (:mod:`.sources`: local,
Hub, HTTP, SSH; :func:`.sources.open_source`), the reader that turns header bytes into an
:class:`~.inventory.Inventory` and reads tensors and configs (:mod:`.reader`, :mod:`.pipeline`), what
every analysis reads about a drafter and its target (:mod:`.drafter`: vocabulary map, embedding and
lm_head rows), hidden-state dumps (:mod:`.dumps`), and the checked connection to a Dask scheduler
(:mod:`.scheduler`). May import :mod:`eaglekit.core` only.
"""
