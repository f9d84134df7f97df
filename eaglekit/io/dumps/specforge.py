"""SpecForge's offline hidden states (``scripts/prepare_hidden_states.py``).

Layout, from the writer (``HiddenStatesGenerator._get_file_path``, ``DataPoint``)::

    {out}/rows_{g}-{g + 2000}/data_{idx}.ckpt      (or .ckpt.gz; --file-group-size, 5000 in older versions)
        torch.save dict: input_ids [T] int64, loss_mask [T],
                         hidden_state [1, T, H]          what SGLang hands its logits processor: AFTER the final norm
                         aux_hidden_state [1, T, n_aux*H] the captured layers concatenated, list order

SpecForge's offline trainer reads them back with ``list_local_files`` (``.ckpt`` and ``.ckpt.gz``,
sorted) and ``OfflineEagle3Dataset``, and computes the target's logits with ``TargetHead`` = the
target's ``lm_head`` alone, which is why ``hidden_state`` is post-norm. The layer ids are not stored.
"""

from __future__ import annotations

from eaglekit.core.errors import HeaderError
from eaglekit.core.redact import shown
from eaglekit.io.dumps.files import DumpFolder, gunzip, torch_load
from eaglekit.io.dumps.record import DumpRecord, FinalNorm, make_record

FORMAT = "specforge"
FINAL_NORM: FinalNorm = "after-norm"
SUFFIXES = (".ckpt", ".ckpt.gz")
KEYS = ("input_ids", "loss_mask", "hidden_state", "aux_hidden_state")


def evidence(folder: DumpFolder) -> list[str]:
    """The folder's entries that show this writer's layout: ``rows_*`` groups and ``.ckpt`` / ``.ckpt.gz`` files."""
    return [n for n in folder.names() if n.startswith("rows_") or n.endswith(SUFFIXES)]


def list_samples(folder: DumpFolder) -> list[str]:
    return folder.walk(suffixes=SUFFIXES)


def read_sample(folder: DumpFolder, name: str) -> DumpRecord:
    where = folder.where(name)
    data = gunzip(folder, name) if name.endswith(".gz") else folder.read(name)
    obj = torch_load(data, where=where)
    if not isinstance(obj, dict) or any(k not in obj for k in KEYS):
        got = sorted(map(str, obj)) if isinstance(obj, dict) else type(obj).__name__
        raise HeaderError(f"{shown(where)} is not a SpecForge sample: expected a dict with {', '.join(KEYS)}, got "
                          f"{shown(str(got)[:200])}.")
    if obj["aux_hidden_state"] is None:
        raise HeaderError(f"{shown(where)} has no aux_hidden_state: it was dumped without "
                          "--enable-aux-hidden-states, and an EAGLE-3 drafter needs them.")
    return make_record(name, where=where, input_ids=obj["input_ids"], aux=obj["aux_hidden_state"],
                       final=obj["hidden_state"], loss_mask=obj["loss_mask"], trim_ids=True)
