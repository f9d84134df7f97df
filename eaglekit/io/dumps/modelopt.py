"""NVIDIA Model-Optimizer's hidden states (``examples/speculative_decoding/collect_hidden_states/
compute_hidden_states_hf.py``), in both of the writer's versions.

Layout, from the writer::

    {output_dir}/{conversation_id}.pt
        torch.save dict: input_ids [T], hidden_states [T, H]  (Hugging Face hidden_states[-1]: AFTER the final norm),
                         aux_hidden_states [T, n x H]  (the captured layers concatenated, sorted),
                         loss_mask [T]  (the 2026 writer only), conversation_id

* **2025** (NVIDIA/TensorRT-Model-Optimizer from ``add61dbb``, Sep 2025, to NVIDIA/Model-Optimizer before
  ``1ec931c2c``): ``--input-file`` (later ``--input-data``); aux = ``hidden_states[i]`` for i in
  ``sorted({2, L//2, L-3})`` (``output_hidden_states`` indices); no loss mask: the whole conversation counts.
* **2026** (NVIDIA/Model-Optimizer ``1ec931c2c``, "Offline DFlash training", April 2026): ``--input-data``,
  layers chosen by ``--aux-layers`` through the modelopt package (``common.resolve_aux_layers``; default
  ``eagle`` = ``modelopt.torch.speculative.plugins.hf_eagle.default_eagle_aux_layer_ids`` = 0-based
  ``sorted({1, L//2 - 1, L - 4})``, saved as ``hidden_states[lid + 1]``; ``dflash`` or an explicit list
  otherwise), and a ``loss_mask`` [T] long from ``tokenize_with_loss_mask``: the tokenizer's assistant mask
  with ``--answer-only-loss``, all ones without.

Which version wrote a dump is read from its first sample's keys (``loss_mask`` present or not) and reported.
The aux indices are Hugging Face ``output_hidden_states`` indices (index i = output of decoder layer i - 1).
The set can collapse: a 4-layer target gives two layers, not three, in both versions.

A folder is recognised by its files' keys (:func:`~eaglekit.io.dumps.peek.saved_names`), not by the
``.pt`` extension alone: other writers leave ``.pt`` files too (speculators' ``token_freq.pt``).
"""

from __future__ import annotations

from eaglekit.core.errors import HeaderError
from eaglekit.core.redact import shown
from eaglekit.io.dumps.files import DumpFolder, torch_load
from eaglekit.io.dumps.peek import saved_names
from eaglekit.io.dumps.record import DumpRecord, FinalNorm, make_record

FORMAT = "modelopt"
FINAL_NORM: FinalNorm = "after-norm"
SUFFIXES = (".pt",)
KEYS = ("input_ids", "hidden_states", "aux_hidden_states")
#: ``.pt`` files other writers leave beside their data (speculators' prepare_data.py: token frequencies)
NOT_SAMPLES = ("token_freq.pt",)
#: Files whose keys are looked at to recognise a folder (the first ones in name order)
PEEK = 3
#: The writer's versions, told apart by a sample's keys: what each one is, in words (for results and messages)
VERSIONS = {
    "2025": "compute_hidden_states_hf.py of 2025 to April 2026 (no loss_mask; layers sorted({2, L//2, L-3}))",
    "2026": ("compute_hidden_states_hf.py since April 2026 (Model-Optimizer 1ec931c2c: --input-data, --aux-layers "
             "through modelopt, loss_mask stored)"),
}
#: How each version picks its layers, in words (for messages)
RULES = {
    "2025": "output_hidden_states sorted({2, L//2, L-3}) of an L-layer target",
    "2026": ("by default (--aux-layers eagle) output_hidden_states lid + 1 for modelopt's "
             "default_eagle_aux_layer_ids sorted({1, L//2 - 1, L - 4}) of an L-layer target"),
}
RULE = RULES["2025"]


def version_of(keys) -> str:
    """The writer version whose samples hold ``keys``: the 2026 writer stores a ``loss_mask``."""
    return "2026" if "loss_mask" in keys else "2025"


def hidden_state_indices(num_layers: int, version: str = "2025") -> tuple[int, ...]:
    """The output_hidden_states indices the writer ``version`` concatenates (the 2026 one by default: its
    ``--aux-layers`` can name others), for a ``num_layers``-layer target."""
    if version == "2026":
        return tuple(lid + 1 for lid in sorted({1, max(0, num_layers // 2 - 1), max(0, num_layers - 4)}))
    return tuple(sorted({2, max(0, num_layers // 2), max(1, num_layers - 3)}))


def dump_version(folder: DumpFolder, files) -> str:
    """The writer version of a dump: from its first sample's keys (2025 where they cannot be read)."""
    keys = saved_names(folder, files[0]) if files else None
    return version_of(keys or ())


def evidence(folder: DumpFolder) -> list[str]:
    """The folder's files that show this writer's layout: top-level ``.pt`` files whose pickle holds its keys
    (the first few looked at)."""
    seen = [n for n in list_samples(folder)][:PEEK]
    return [n for n in seen if (keys := saved_names(folder, n)) is not None and all(k in keys for k in KEYS)]


def list_samples(folder: DumpFolder) -> list[str]:
    return [n for n in folder.walk(suffixes=SUFFIXES) if "/" not in n and n not in NOT_SAMPLES]


def read_sample(folder: DumpFolder, name: str) -> DumpRecord:
    where = folder.where(name)
    obj = torch_load(folder.read(name), where=where)
    if not isinstance(obj, dict) or any(k not in obj for k in KEYS):
        got = sorted(map(str, obj)) if isinstance(obj, dict) else type(obj).__name__
        raise HeaderError(f"{shown(where)} is not a Model-Optimizer sample: expected a dict with {', '.join(KEYS)}, "
                          f"got {shown(str(got)[:200])}.")
    return make_record(name, where=where, input_ids=obj["input_ids"], aux=obj["aux_hidden_states"],
                       final=obj["hidden_states"], loss_mask=obj.get("loss_mask"))
