"""Dequantisation by row block against the reference implementations: compressed-tensors' own unpacking
and dequantisation for pack-quantised INT, torch's float8_e4m3fn for FP8 blocks; ragged blocks included."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from eaglekit.analysis.drift.dequant import (E4M3, QuantSchemeError, QuantWeight, Scratch, align_name, quant_weights,
                                       read_row_set, read_rows, to_float32)
from eaglekit.io.inventory import Inventory, TensorEntry

_DT = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.int32: "I32", torch.int64: "I64",
       torch.float8_e4m3fn: "F8_E4M3", torch.int8: "I8"}


def _mem(tensors: dict[str, torch.Tensor], config=None):
    """An in-memory checkpoint: an Inventory over the tensors and a byte-range reader."""
    blobs, entries, off = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().view(torch.uint8).numpy().tobytes() if t.dtype != torch.bool else t.numpy().tobytes()
        blobs[name] = raw
        entries.append(TensorEntry(name, _DT[t.dtype], tuple(t.shape), t.numel(), len(raw), "mem", off))
        off += len(raw)
    inv = Inventory("mem", (), tuple(sorted(entries, key=lambda e: e.name)), config=config)

    def read(t, start, length):
        return blobs[t.name][start:start + length]

    return inv, read


def test_e4m3_table_matches_torch():
    bits = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    ref = bits.view(torch.float8_e4m3fn).float().numpy()
    assert np.array_equal(np.isnan(ref), np.isnan(E4M3))
    assert np.array_equal(ref[~np.isnan(ref)], E4M3[~np.isnan(E4M3)])
    for scratch in (None, Scratch()):  # the bit-moving decoder, with and without reused buffers
        ours = to_float32(bytes(range(256)), "F8_E4M3", scratch)
        assert np.array_equal(ours, ref, equal_nan=True)
    bf = torch.randn(1000).bfloat16()
    assert np.array_equal(to_float32(bf.view(torch.uint8).numpy().tobytes(), "BF16", Scratch()), bf.float().numpy())


@pytest.mark.parametrize("rows,cols", [(256, 384), (300, 200), (7, 130)])  # exact, ragged, tiny
def test_fp8_block_equals_torch_reference(rows, cols):
    g = torch.Generator().manual_seed(rows)
    w = (torch.randn(rows, cols, generator=g) * 3).to(torch.float8_e4m3fn)
    s = torch.rand(-(-rows // 128), -(-cols // 128), generator=g) + 0.1
    ref = w.float() * s.repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]  # (rows, cols)
    inv, read = _mem({"m.weight": w, "m.weight_scale_inv": s},
                     {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})
    qw = quant_weights(inv)["m.weight"]
    assert qw.scheme == "fp8-block" and qw.shape == (rows, cols)
    scratch = Scratch()
    for r0, r1 in [(0, rows), (min(5, rows - 1), rows), (0, 1)]:  # block-crossing and ragged row ranges
        assert np.array_equal(read_rows(read, qw, r0, r1), ref[r0:r1].numpy())
        assert np.array_equal(read_rows(read, qw, r0, r1, scratch=scratch), ref[r0:r1].numpy())
    pick = np.array(sorted({0, rows // 2, rows // 2 + 1, rows - 1}))
    assert np.array_equal(read_row_set(read, qw, pick), ref.numpy()[pick])


def _ct_reference(q, scale, zp, group, bits=4, symmetric=False):
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

    args = QuantizationArgs(num_bits=bits, type="int", symmetric=symmetric, strategy="group", group_size=group)
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    sd = {"weight_packed": pack_to_int32(q, bits), "weight_scale": scale, "weight_shape": torch.tensor(q.shape)}
    if not symmetric:
        sd["weight_zero_point"] = pack_to_int32(zp, bits, packed_dim=0)
    ref = PackedQuantizationCompressor.decompress(dict(sd), scheme)["weight"]
    return sd, ref


@pytest.mark.parametrize("rows,cols,group,symmetric,sdtype", [
    (64, 256, 32, True, torch.float32),     # K2.5-like: symmetric, group 32
    (37, 100, 20, False, torch.float32),    # ragged: cols not a multiple of 8, rows not of 8, zero points
    (16, 12, 4, False, torch.bfloat16),     # bf16 scales
])
def test_int_pack_equals_compressed_tensors(rows, cols, group, symmetric, sdtype):
    g = torch.Generator().manual_seed(cols)
    q = torch.randint(-8, 8, (rows, cols), generator=g, dtype=torch.int8)
    scale = (torch.rand(rows, cols // group, generator=g) + 0.05).to(sdtype)
    zp = torch.randint(-8, 8, (rows, cols // group), generator=g, dtype=torch.int8)
    sd, ref = _ct_reference(q, scale, zp, group, symmetric=symmetric)
    config = {"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                      "config_groups": {"g": {"weights": {"num_bits": 4, "group_size": group}}}}}
    inv, read = _mem({f"x.{k}": v for k, v in sd.items()}, config)
    qw = quant_weights(inv)["x.weight"]
    assert (qw.scheme, qw.shape, qw.group) == ("int-pack", (rows, cols), group)
    ours = read_rows(read, qw, 0, rows)
    if sdtype == torch.float32:
        assert np.array_equal(ours, ref.numpy())
    else:  # the reference multiplies in bf16: ours in float32, rounded once, equals it
        assert torch.equal(torch.from_numpy(ours).to(sdtype), ref)
    scratch = Scratch()
    for r0, r1 in [(3, rows), (rows - 1, rows), (1, 9)]:  # row blocks off the 8-row zero-point words
        r1 = min(r1, rows)
        assert np.array_equal(read_rows(read, qw, r0, r1), ours[r0:r1])
        assert np.array_equal(read_rows(read, qw, r0, r1, scratch=scratch), ours[r0:r1])


def _int_config(group=32, method="compressed-tensors", fmt="pack-quantized"):
    return {"quantization_config": {"quant_method": method, "format": fmt,
                                    "config_groups": {"g": {"weights": {"num_bits": 4, "group_size": group}}}}}


def test_bad_schemes_say_what_is_wrong():
    q = torch.zeros(8, 64, dtype=torch.int8)
    sd, _ = _ct_reference(q, torch.ones(8, 2), None, 32, symmetric=True)
    inv, _ = _mem({f"x.{k}": v for k, v in sd.items()}, _int_config(group=16))
    with pytest.raises(QuantSchemeError, match="mismatched group size"):
        quant_weights(inv)
    inv, _ = _mem({"x.weight_packed": sd["weight_packed"], "x.weight_shape": sd["weight_shape"]}, _int_config())
    with pytest.raises(QuantSchemeError, match="scale tensor missing.*x.weight_scale"):
        quant_weights(inv)
    inv, _ = _mem({"x.weight": torch.zeros(4, 4).to(torch.float8_e4m3fn)})
    with pytest.raises(QuantSchemeError, match="scale tensor missing.*weight_scale_inv"):
        quant_weights(inv)
    inv, _ = _mem({"x.weight": torch.zeros(4, 4).to(torch.float8_e4m3fn), "x.weight_scale": torch.ones(4, 1)})
    with pytest.raises(QuantSchemeError, match="unknown quantisation scheme: x.weight is F8_E4M3 with a weight_scale"):
        quant_weights(inv)
    inv, _ = _mem({"x.weight": torch.zeros(4, 4)}, {"quantization_config": {"quant_method": "awq"}})
    with pytest.raises(QuantSchemeError, match="unknown quantisation scheme quant_method='awq'"):
        quant_weights(inv)
    inv, _ = _mem({"x.qweight": torch.zeros(4, 4, dtype=torch.int32), "x.scales": torch.ones(4, 1)})
    with pytest.raises(QuantSchemeError, match="unknown quantisation scheme"):
        quant_weights(inv)


def test_names_align_across_wrappers():
    assert align_name("language_model.model.layers.3.mlp.experts.1.up_proj.weight") == \
        align_name("model.layers.3.mlp.experts.1.up_proj.weight") == "layers.3.mlp.experts.1.up_proj.weight"
    assert align_name("language_model.lm_head.weight") == align_name("lm_head.weight") == "lm_head.weight"
    assert align_name("model.language_model.embed_tokens.weight") == "embed_tokens.weight"
    assert align_name("vision_tower.blocks.0.attn.weight") == "vision_tower.blocks.0.attn.weight"


def test_plain_tensors_fold_to_rows():
    inv, read = _mem({"n.weight": torch.arange(6, dtype=torch.float32).to(torch.bfloat16),
                      "e.weight": torch.randn(2, 3, 4)})
    ws = quant_weights(inv)
    assert ws["n.weight"].shape == (1, 6) and ws["e.weight"].shape == (6, 4)
    assert np.array_equal(read_rows(read, ws["n.weight"], 0, 1)[0], np.arange(6, dtype=np.float32))
    assert isinstance(ws["e.weight"], QuantWeight)
