"""One training sample as every dump reader hands it over, whatever wrote it.

The three training pipelines store the same facts under different keys and shapes (docs/acceptance.md,
"Hidden-state dumps"); each reader turns a file into a :class:`DumpRecord` and checks it on the way:
shapes that agree with each other, a length within :data:`~eaglekit.io.dumps.files.MAX_POSITIONS`,
integer token ids, floating hidden states.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from eaglekit.core.errors import HeaderError
from eaglekit.core.redact import shown
from eaglekit.io.dumps.files import MAX_POSITIONS

#: Where a dump's final hidden state sits relative to the target's final norm.
FinalNorm = Literal["before-norm", "after-norm"]
DumpFormat = Literal["eaglekit", "specforge", "speculators", "modelopt"]


@dataclass(frozen=True, eq=False)
class DumpRecord:
    """One sample: ``input_ids`` (T,) int64; ``aux`` (T, n_aux * H), the captured layers concatenated
    in capture order; ``final`` (T, H), the last hidden state (before or after the final norm, as the
    format says); ``loss_mask`` (T,) bool or None where the format does not store it."""

    name: str
    input_ids: Any          # torch.Tensor (T,) int64
    aux: Any                # torch.Tensor (T, n_aux * H)
    final: Any              # torch.Tensor (T, H)
    loss_mask: Any = None   # torch.Tensor (T,) bool | None

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def hidden_size(self) -> int:
        return int(self.final.shape[-1])


def _dtypes():
    import torch

    return ((torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8),
            (torch.bfloat16, torch.float16, torch.float32, torch.float64))


def check_stored(value, key: str, where: str) -> None:
    """A dense tensor whose declared elements are all held by its storage: a sparse, quantised or nested
    tensor is refused (they cannot be checked for NaN or drafted from), and so is a view whose shape
    declares more elements than the bytes the file stored (stride-0 views: a 3 KB file declaring a
    million positions). One :class:`HeaderError` each."""
    import torch

    if value.layout != torch.strided or value.is_quantized or getattr(value, "is_nested", False):
        raise HeaderError(f"{shown(where)}: {key!r} is a {str(value.layout).replace('torch.', '')} tensor; a dump "
                          "sample holds dense tensors only.")
    if value.numel() == 0:
        return
    if any(st == 0 and n > 1 for st, n in zip(value.stride(), value.shape)):
        raise HeaderError(f"{shown(where)}: {key!r} repeats its values along a dimension (a stride-0 view of "
                          f"shape {list(value.shape)}); torch.save of real hidden states never writes that.")
    declared = value.numel() * value.element_size()
    stored = value.untyped_storage().nbytes()
    if declared > stored:
        raise HeaderError(f"{shown(where)}: {key!r} declares {list(value.shape)} ({declared} bytes) but its storage "
                          f"in the file holds {stored} bytes; refusing it.")


def make_record(name: str, *, where: str, input_ids, aux, final, loss_mask=None, trim_ids: bool = False) -> DumpRecord:
    """Check one sample's tensors against each other and build its record.

    ``trim_ids``: the format may pad ``input_ids``/``loss_mask`` past the hidden states' length
    (SpecForge's batched writer pads rows on the right); they are cut to it."""
    import torch  # heavy: readers hand over torch tensors

    def tensor(value, key: str):
        if not isinstance(value, torch.Tensor):
            raise HeaderError(f"{shown(where)}: {key!r} is {type(value).__name__}, expected a tensor.")
        check_stored(value, key, where)
        return value

    _INTEGERS, _FLOATS = _dtypes()
    ids, aux, final = tensor(input_ids, "input_ids"), tensor(aux, "aux hidden states"), tensor(final, "hidden state")
    while ids.ndim > 1 and ids.shape[0] == 1:
        ids = ids[0]
    while aux.ndim > 2 and aux.shape[0] == 1:
        aux = aux[0]
    while final.ndim > 2 and final.shape[0] == 1:
        final = final[0]
    if ids.ndim != 1 or aux.ndim != 2 or final.ndim != 2:
        raise HeaderError(f"{shown(where)}: shapes input_ids {list(ids.shape)}, aux {list(aux.shape)}, final "
                          f"{list(final.shape)}; expected [T], [T, n_aux x H] and [T, H].")
    if ids.dtype not in _INTEGERS or aux.dtype not in _FLOATS or final.dtype not in _FLOATS:
        raise HeaderError(f"{shown(where)}: input_ids must be integers and hidden states bf16, fp16 or fp32 "
                          f"(got {ids.dtype}, {aux.dtype}, {final.dtype}).")
    T = int(final.shape[0])
    if T > MAX_POSITIONS:
        raise HeaderError(f"{shown(where)} declares {T} positions, over the {MAX_POSITIONS} eaglekit reads in one "
                          "sample; refusing it.")
    if aux.shape[0] != T:
        raise HeaderError(f"{shown(where)}: aux hidden states cover {aux.shape[0]} positions, the final hidden state "
                          f"{T}; they must agree.")
    if trim_ids and ids.shape[0] > T:
        ids = ids[:T]
    if ids.shape[0] != T:
        raise HeaderError(f"{shown(where)}: input_ids has {ids.shape[0]} tokens but the hidden states cover {T} "
                          "positions.")
    if aux.shape[1] % final.shape[1]:
        raise HeaderError(f"{shown(where)}: aux width {aux.shape[1]} is not a multiple of the hidden size "
                          f"{final.shape[1]}.")
    mask = None
    if loss_mask is not None:
        mask = tensor(loss_mask, "loss_mask")
        if mask.dtype != torch.bool and mask.dtype not in _INTEGERS and mask.dtype not in _FLOATS:
            raise HeaderError(f"{shown(where)}: loss_mask is {mask.dtype}; expected 0/1 as bool or integers.")
        while mask.ndim > 1 and mask.shape[0] == 1:
            mask = mask[0]
        if trim_ids and mask.ndim == 1 and mask.shape[0] > T:
            mask = mask[:T]
        if mask.shape != (T,):
            raise HeaderError(f"{shown(where)}: loss_mask is {list(mask.shape)}, expected [{T}].")
        mask = mask != 0
    return DumpRecord(name, ids.to(torch.int64), aux, final, mask)
