"""Byte I/O: where checkpoints live and how their bytes are fetched.

One location grammar (:mod:`.location`), sources that only fetch byte ranges (:mod:`.sources`: local,
Hub, HTTP, SSH), the reader that turns header bytes into an :class:`~.inventory.Inventory` and reads
tensors and configs (:mod:`.reader`); hidden-state dumps (:mod:`.hidden_states`). May import :mod:`eaglekit.core` only.
"""
