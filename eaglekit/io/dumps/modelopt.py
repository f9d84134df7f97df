"""NVIDIA Model-Optimizer's hidden states (``examples/speculative_decoding/collect_hidden_states/
compute_hidden_states_hf.py``).

Layout, from the writer::

    {output_dir}/{conversation_id}.pt
        torch.save dict: input_ids [T], hidden_states [T, H]  (Hugging Face hidden_states[-1]: AFTER the final norm),
                         aux_hidden_states [T, 3H]  (hidden_states[i] for i in sorted({2, L//2, L-3}), concatenated),
                         conversation_id

No loss mask is stored: the whole conversation (chat template applied) is in ``input_ids``. The aux
indices are Hugging Face ``output_hidden_states`` indices (index i = output of decoder layer i - 1).
The set can collapse: a 4-layer target gives ``{2, 2, 1}`` = two layers, not three.

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
#: How the writer picks its layers, in words (for messages)
RULE = "output_hidden_states sorted({2, L//2, L-3}) of an L-layer target"


def hidden_state_indices(num_layers: int) -> tuple[int, ...]:
    """The output_hidden_states indices the writer concatenates, for an ``num_layers``-layer target."""
    return tuple(sorted({2, max(0, num_layers // 2), max(1, num_layers - 3)}))


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
