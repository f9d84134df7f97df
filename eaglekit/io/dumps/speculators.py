"""speculators' hidden states (vllm-project/speculators data generation, through vLLM's
``extract_hidden_states`` method and its hidden-states KV connector).

Layout, from the writers (vLLM ``example_hidden_states_connector.py`` saves; speculators
``train/data.py`` caches and reads)::

    {dataset}/hidden_states/hs_{i}.safetensors
        hidden_states [T, L, H]   the configured layers in order; the last one is the final layer's output
                                  BEFORE the final norm (speculators applies verifier_norm, then lm_head)
        token_ids     [T] int64

The loss mask lives in the preprocessed (Arrow) dataset beside it, not in the file; eaglekit reads the
files only, so every position counts unless the caller supplies masks. Safetensors: the header is read
and checked (shapes against the file size, the position limit) before any tensor byte.
"""

from __future__ import annotations

import os
import re

from eaglekit.core.errors import HeaderError
from eaglekit.core.redact import shown
from eaglekit.core.checkpoint.tensors import to_torch
from eaglekit.io.dumps.files import MAX_POSITIONS, MAX_SAMPLE_BYTES, DumpFolder
from eaglekit.io.dumps.record import DumpRecord, FinalNorm, make_record
from eaglekit.io.reader import read_header

FORMAT = "speculators"
FINAL_NORM: FinalNorm = "before-norm"
_NAME = re.compile(r"^hs_\d+\.safetensors$")
_FLOATS = ("BF16", "F16", "F32")


#: What prepare_data.py writes beside the data generation's hidden_states/ folder
COMPANIONS = ("token_freq.pt", "dataset_info.json", "state.json", "data_config.json", "d2t.npy", "t2d.npy")


def evidence(folder: DumpFolder) -> list[str]:
    """The folder's files that show this writer's layout: ``hs_{i}.safetensors`` at the top or in
    ``hidden_states/`` (a sample of them), with the prepared dataset's files beside them."""
    names = folder.names()
    samples = [n for n in names if _NAME.match(n)]
    if not samples and "hidden_states" in names and os.path.isdir(os.path.join(folder.path, "hidden_states")):
        samples = [f"hidden_states/{n}" for n in DumpFolder(os.path.join(folder.path, "hidden_states")).names()
                   if _NAME.match(n)] or ["hidden_states/"]
    if not samples:
        return []
    return samples + [n for n in names if n in COMPANIONS or n.endswith(".arrow")]


def list_samples(folder: DumpFolder) -> list[str]:
    names = folder.walk(suffixes=(".safetensors",))
    return [n for n in names if _NAME.match(n.rsplit("/", 1)[-1]) and n.count("/") <= 1]


def read_sample(folder: DumpFolder, name: str) -> DumpRecord:
    where = folder.where(name)
    header = read_header(folder.source, name)
    tensors = {t.name: t for t in header.tensors}
    hs, ids = tensors.get("hidden_states"), tensors.get("token_ids")
    if hs is None or ids is None:
        raise HeaderError(f"{shown(where)} is not a speculators sample: expected hidden_states and token_ids, got "
                          f"{shown(', '.join(sorted(tensors))[:200])}.")
    if len(hs.shape) != 3 or hs.dtype not in _FLOATS or len(ids.shape) != 1 or ids.dtype not in ("I64", "I32"):
        raise HeaderError(f"{shown(where)}: hidden_states {hs.dtype} {list(hs.shape)} and token_ids {ids.dtype} "
                          f"{list(ids.shape)}; expected a float [T, layers, H] and an integer [T].")
    if hs.shape[0] > MAX_POSITIONS:
        raise HeaderError(f"{shown(where)} declares {hs.shape[0]} positions, over the {MAX_POSITIONS} eaglekit reads "
                          "in one sample; refusing it.")
    if hs.shape[1] < 2:
        raise HeaderError(f"{shown(where)} holds {hs.shape[1]} layer(s); a speculators sample holds the aux layers "
                          "and the final one.")
    if header.file_size > MAX_SAMPLE_BYTES:
        raise HeaderError(f"{shown(where)} is {header.file_size} bytes, over the {MAX_SAMPLE_BYTES}-byte limit "
                          "for one dump sample; refusing it.")
    start = header.header_bytes

    def tensor(t):  # only this tensor's bytes, by range (never the whole file and a slice of it)
        a, b = t.data_offsets
        data = folder.source.read(name, start + a, b - a).data
        if len(data) != b - a:
            raise HeaderError(f"{shown(where)} ends inside {t.name}: {len(data)} of its {b - a} bytes are there.")
        return to_torch(data, t.dtype, t.shape, name=f"{where}: {t.name}")

    h, tok = tensor(hs), tensor(ids)                                  # (T, L, H), (T,)
    T, L, H = h.shape
    return make_record(name, where=where, input_ids=tok, aux=h[:, :-1].reshape(T, (L - 1) * H), final=h[:, -1])
