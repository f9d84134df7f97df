"""A vocabulary map saved the way SpecForge saves it: ``torch.save({"d2t": ..., "t2d": ...}, "*.pt")``
(``specforge/data/preprocessing.py`` ``generate_vocab_mapping_file``), read without unpickling code.

The file must be a regular file of at most :data:`MAX_MAP_FILE` bytes (checked before it is read), and
is loaded with ``torch.load(weights_only=True)``: a pickle that names anything but tensors and plain
containers is refused, as one line.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from eaglekit.core.errors import HeaderError, InputError, VocabMapError
from eaglekit.core.redact import shown
from eaglekit.io.dumps.files import torch_load
from eaglekit.io.sources.local import LocalSource

#: Bytes a .pt map may have: d2t and t2d of the largest vocabularies take a few MiB.
MAX_MAP_FILE = 64 << 20


def read_map_file(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(d2t, t2d)`` from a SpecForge ``.pt`` vocabulary map."""
    import torch  # the map is a torch pickle; torch loads only when one is read

    file = Path(path).expanduser()
    if not file.exists():
        raise InputError(f"{shown(file)}: no such vocabulary map file.")
    source = LocalSource(str(file.parent), display=str(file), named=file.name)
    data = source.read_small(file.name, limit=MAX_MAP_FILE)
    if data is None:
        raise InputError(f"{shown(file)}: no such vocabulary map file.")
    try:  # torch's zip format only, weights_only: objects are refused, never run
        obj = torch_load(data, where=str(file), expected="A vocabulary map is {'d2t': tensor, 't2d': tensor}")
    except HeaderError as e:
        raise InputError(f"{e} (not a vocabulary map torch can load safely)") from e
    if not isinstance(obj, dict) or not all(isinstance(obj.get(k), torch.Tensor) for k in ("d2t", "t2d")):
        raise VocabMapError(f"{shown(file)} holds no d2t and t2d tensors: give the map SpecForge wrote "
                            "({'d2t': int64 [N], 't2d': bool [vocab]}).")
    return obj["d2t"].numpy(), obj["t2d"].numpy()
