"""Checks on a weight before a figure depends on it: declared shapes before any byte is read, and no NaN
or Inf once it is (the drafter's embedding and head, the target's head)."""

from __future__ import annotations

import torch

from eaglekit.core.errors import ConfigError, InputError, VocabMapError
from eaglekit.core.redact import shown
from eaglekit.io.reader import Checkpoint

#: Values checked per block: bounded to this many floats (256 MB in float32).
CHECK_FLOATS = 1 << 26


def check_finite(t: torch.Tensor, name: str, where: str) -> None:
    """Refuse a weight a figure depends on (an lm_head, a norm, an embedding) when it holds NaN or Inf: one
    +Inf in a target's lm_head moves its argmax at every position, and the accept length would come out
    wrong, not missing. Checked a block of rows at a time (memory: one block's flags)."""
    if not t.is_floating_point() or t.numel() == 0:
        return
    rows = t.reshape(t.shape[0], -1) if t.ndim > 1 else t.reshape(1, -1)
    step = max(1, CHECK_FLOATS // max(1, rows.shape[1]))
    bad = 0
    for s in range(0, rows.shape[0], step):
        bad += int((~torch.isfinite(rows[s:s + step])).sum())
    if bad:
        what = "every value" if bad == t.numel() else f"{bad:,} of its {t.numel():,} values"
        raise InputError(f"{shown(where)}: {name} holds NaN or Inf in {what}; a target's next tokens computed "
                         "from it would be wrong, so nothing is measured. Check or re-download the checkpoint.")


#: row indices a refusal names (the count says how many more)
SHOWN_ROWS = 8


def check_rows_finite(t: torch.Tensor, name: str, where: str, *, first_row: int = 0) -> None:
    """Refuse a matrix (a drafter's own lm_head, whole or one streamed block whose first row is ``first_row``)
    whose rows hold NaN or Inf, naming the rows: a NaN row's logit is NaN, and ``argmax`` then proposes that
    row at every position whatever the drafter computed (accept length 1.0 without an error). Checked a block
    of rows at a time (memory: one block's flags)."""
    if not t.is_floating_point() or t.numel() == 0:
        return
    rows = t.reshape(t.shape[0], -1)
    step = max(1, CHECK_FLOATS // max(1, rows.shape[1]))
    bad: list[int] = []
    count = 0
    for s in range(0, rows.shape[0], step):
        hit = (~torch.isfinite(rows[s:s + step])).any(-1).nonzero().flatten()
        count += int(hit.numel())
        bad += [first_row + s + int(i) for i in hit[:SHOWN_ROWS - len(bad)]] if len(bad) < SHOWN_ROWS else []
    if count:
        more = f" and {count - len(bad)} more" if count > len(bad) else ""
        raise InputError(f"{shown(where)}: {name} holds NaN or Inf in row{'s' if count > 1 else ''} {bad}{more}: "
                         "a NaN row's logit is NaN, so the drafter's proposals (and any accept length) would be "
                         "meaningless. Re-export or re-download the drafter; nothing is measured.")


def check_declared(ckpt: Checkpoint, name: str, expect: tuple[int | None, int | None], what: str) -> None:
    """Compare a tensor's shape in the checkpoint's header with ``expect`` (rows, columns: the drafter's
    target vocabulary and width) BEFORE any of its bytes are read: a header declaring a 14 GB lm_head of
    another model is refused unread."""
    where = ckpt.inventory.source
    shape = tuple(ckpt.inventory[name].shape)
    if len(shape) != 2:
        raise ConfigError(f"{shown(where)}: {name} is {list(shape)}, expected [vocab, hidden].")
    vocab, width = expect
    if vocab is not None and shape[0] != vocab:
        raise VocabMapError(f"vocabulary mismatch: {what} {shown(where)} declares {name} with {shape[0]} rows, but "
                            f"the drafter's config says the target vocabulary has {vocab} tokens; give the drafter's "
                            "target (nothing was read).")
    if width is not None and shape[1] != width:
        raise InputError(f"hidden-size mismatch: {what} {shown(where)} declares {name} {shape[1]} wide, the drafter "
                         f"reads target hidden states of size {width}; give the drafter's target (nothing was read).")
