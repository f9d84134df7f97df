"""Planning a comparison: even grid splits, meaningful parts and their labels, row blocks as byte ranges."""

from __future__ import annotations

import numpy as np
import pytest

from eaglekit.core.errors import InputError
from eaglekit.io.inventory import TensorEntry
from eaglekit.analysis.similarity.plan import (Job, _parts, aux_layer_ids, blocks, check_grid, column_runs, matrix_shape,
                                      split_edges)


def test_split_edges_and_matrix_shape():
    assert split_edges(10, 4).tolist() == [0, 3, 6, 8, 10]
    assert split_edges(64, 64).tolist() == list(range(65))
    assert [len(p) for p in np.array_split(np.arange(37), 5)] == np.diff(split_edges(37, 5)).tolist()
    assert matrix_shape(()) == (1, 1) and matrix_shape((7,)) == (7, 1) and matrix_shape((3, 4, 5)) == (3, 20)


def test_column_runs_group_equal_widths():
    assert column_runs(split_edges(10, 4)) == [(0, 2, 3), (6, 2, 2)]
    assert column_runs(split_edges(12, 4)) == [(0, 4, 3)]
    assert column_runs(np.array([0, 1, 3, 4])) == [(0, 1, 1), (1, 1, 2), (3, 1, 1)]


def test_part_labels_follow_the_configs_aux_layers():
    names = lambda aux: [p.name for p in _parts("fc.weight", 4, 12, (2, 2), aux)]  # noqa: E731
    assert names(([2, 30, 58], [2, 30, 58])) == ["fc.weight[low: aux layer 2]", "fc.weight[mid: aux layer 30]",
                                                 "fc.weight[high: aux layer 58]"]
    assert names(([2, 30, 58], [1, 30, 57]))[0] == "fc.weight[low: aux layer 2 vs 1]"  # two conventions
    assert names((None, None)) == ["fc.weight[low]", "fc.weight[mid]", "fc.weight[high]"]
    q = _parts("midlayer.self_attn.q_proj.weight", 8, 10, (64, 64), (None, None))
    assert [(p.name, p.cols) for p in q] == [("midlayer.self_attn.q_proj.weight[embed]", (0, 5)),
                                             ("midlayer.self_attn.q_proj.weight[hidden]", (5, 10))]
    assert q[0].row_edges.tolist() == list(range(9)) and q[0].col_edges.tolist() == list(range(6))
    assert [p.name for p in _parts("fc.weight", 4, 10, (2, 2), (None, None))] == ["fc.weight"]  # not 3 blocks


def test_aux_layer_ids_from_either_config_format():
    assert aux_layer_ids({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58]}}) == [2, 30, 58]
    assert aux_layer_ids({"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}) == [1, 29, 57]  # speculators
    assert aux_layer_ids(None) is None and aux_layer_ids({"eagle_config": {}}) is None


def _entry(name, rows, width):
    return TensorEntry(name, "BF16", (rows, width), rows * width, rows * width * 2, "model.safetensors", 0)


def test_aligned_blocks_are_one_range_per_side_within_a_chunk():
    rows_a = np.array([0, 1, 5, 6, 7, 40, 41, 90])
    rows_b = np.array([3, 4, 5, 30, 31, 32, 60, 61])
    job = Job("lm_head.weight", _entry("a", 100, 4), _entry("b", 100, 4), 8, 4, (), rows_a, rows_b)
    out = list(blocks(job, chunk_bytes=8 * 8))  # 8 rows of 8 bytes per chunk
    assert [b.pos for b in out] == [0, 3, 5, 6, 7]  # positions 0..7 in order, no gaps
    for b, end in zip(out, [b.pos for b in out[1:]] + [8]):
        assert b.span_a[1] - b.span_a[0] <= 8 and b.span_b[1] - b.span_b[0] <= 8
        assert (b.span_a[0] + b.sel_a).tolist() == rows_a[b.pos:end].tolist()
        assert (b.span_b[0] + b.sel_b).tolist() == rows_b[b.pos:end].tolist()
    plain = list(blocks(Job("w", _entry("a", 10, 4), _entry("b", 10, 4), 10, 4, ()), chunk_bytes=24))
    assert [(b.pos, b.span_a) for b in plain] == [(0, (0, 3)), (3, (3, 6)), (6, (6, 9)), (9, (9, 10))]


@pytest.mark.parametrize("grid", [(0, 4), (4,), "64x64", (True, 4), (2.5, 3)])
def test_grid_must_be_two_positive_integers(grid):
    with pytest.raises(InputError, match=r"^grid must be two positive integers \(rows, cols\), e.g. \(64, 64\)"):
        check_grid(grid)
