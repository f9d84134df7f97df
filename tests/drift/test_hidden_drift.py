"""Hidden-state drift between two dumps: linear CKA against its definition, positions that agree only,
the demo's depth pattern, and errors for dumps that cannot be compared."""

from __future__ import annotations

import numpy as np
import pytest

from eaglekit.analysis.drift.hidden import hidden_drift, linear_cka
from eaglekit.core.errors import InputError
from eaglekit.demo import targets as demo_targets
from eaglekit.io.dumps.native import DumpManifest, DumpSample, write_dump


def _cka_by_definition(x, y):
    """HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)) with K = XX^T, L = YY^T and the centring matrix H."""
    n = x.shape[0]
    h = np.eye(n) - 1.0 / n
    k, l = x @ x.T, y @ y.T

    def hsic(p, q):
        return np.trace(p @ h @ q @ h)
    return hsic(k, l) / np.sqrt(hsic(k, k) * hsic(l, l))


def test_linear_cka():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 8))
    q, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    assert linear_cka(x, 3 * x @ q + 1) == pytest.approx(1.0)  # blind to rotation, scale and shift
    y = x @ rng.standard_normal((8, 12)) + rng.standard_normal((50, 12))
    assert linear_cka(x, y) == pytest.approx(_cka_by_definition(x, y))  # [n, n] form
    tall_x, tall_y = rng.standard_normal((400, 5)), rng.standard_normal((400, 5))
    assert linear_cka(tall_x, tall_y) == pytest.approx(_cka_by_definition(tall_x, tall_y))  # [H, H] form


def test_demo_dumps_drift_with_depth(tmp_path):
    dumps = demo_targets.build_dumps(tmp_path)
    r = hidden_drift(tmp_path / dumps["k2"], tmp_path / dumps["k25"], progress=False)
    assert [l.index for l in r.layers] == list(demo_targets.DUMP_LAYERS)
    cos = [l.cosine for l in r.layers]
    assert cos == sorted(cos, reverse=True) and cos[0] > 0.95  # the demo turns deeper states further
    assert all(l.cka >= l.cosine for l in r.layers)  # CKA forgives the rotation
    assert r.prompt_positions == 6 * 16 and r.prompt_positions < r.positions < 6 * 40
    assert "output of layer 58" in str(r) and "<table" in r._repr_html_()


def _dump(path, ids_list, states, layers=(1, 2), hidden=4, prompt_len=3):
    samples = [DumpSample(np.array(ids), s, np.array(ids), prompt_len) for ids, s in zip(ids_list, states)]
    return write_dump(path, DumpManifest(target=str(path), hidden_size=hidden, num_hidden_layers=2, vocab_size=100,
                                         layers=layers, samples=len(samples)), samples)


def test_compares_only_positions_that_agree(tmp_path):
    rng = np.random.default_rng(1)
    s = rng.standard_normal((2, 6, 4)).astype(np.float32)
    flipped = s.copy()
    flipped[:, 4:] *= -1  # after the continuations part ways the states differ: must not count
    a = _dump(tmp_path / "a", [[1, 2, 3, 4, 5, 6]], [s])
    b = _dump(tmp_path / "b", [[1, 2, 3, 4, 9, 9]], [flipped])
    r = hidden_drift(a, b, progress=False)
    assert r.positions == 4 and r.layers[0].cosine == pytest.approx(1.0)


def test_errors(tmp_path):
    s = np.zeros((2, 5, 4), np.float32) + 1
    a = _dump(tmp_path / "a", [[1, 2, 3, 4, 5]], [s])
    other_prompt = _dump(tmp_path / "b", [[1, 7, 3, 4, 5]], [s])
    with pytest.raises(InputError, match="different prompts"):
        hidden_drift(a, other_prompt, progress=False)
    other_layers = _dump(tmp_path / "c", [[1, 2, 3, 4, 5]], [s], layers=(3, 4))
    with pytest.raises(InputError, match="share no hidden-state index"):
        hidden_drift(a, other_layers, progress=False)
