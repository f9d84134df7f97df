"""The result cache: keys by content, exact round trips, and entries that are input like any other (a corrupt,
foreign or planted entry is dropped and recomputed, never trusted; nothing is unpickled)."""

from __future__ import annotations

import json
import math
import pickle
import sqlite3
from dataclasses import dataclass

import numpy as np
import pytest

from eaglekit.core.records import RecordError, decode, encode, register
from eaglekit.core.uncertainty import Interval
from eaglekit.io.cache import STORE, ResultCache, cached_call, default_dir, key


@dataclass(frozen=True)
class _Figure:
    value: float
    steps: tuple[int, ...]
    by: dict
    interval: Interval | None
    array: object = None


register(_Figure, Interval)


def _figure():
    return _Figure(float("nan"), (1, 2, 3), {"outputs": 2.5, "inputs": None, "x": (float("inf"), -0.0)},
                   Interval(3.25, 3.0, 3.5, "bootstrap"), np.arange(6, dtype=np.int64).reshape(2, 3))


def test_records_round_trip_exactly_through_json():
    fig = _figure()
    back = decode(json.loads(json.dumps(encode(fig), allow_nan=False)))
    assert isinstance(back, _Figure) and math.isnan(back.value)
    assert back.steps == (1, 2, 3) and isinstance(back.steps, tuple)
    assert back.by == fig.by and back.interval == fig.interval
    assert back.array.dtype == np.int64 and (back.array == fig.array).all() and back.array.shape == (2, 3)
    x = 0.1 + 0.2  # not a short decimal: repr round-trips every bit
    assert decode(json.loads(json.dumps(encode(x)))) == x


@pytest.mark.parametrize("bad", [
    {"$c": "Popen", "f": {}},                                    # not a registered record
    {"$c": "Interval", "f": {"value": 1.0}},                     # fields missing: another version wrote it
    {"$c": "Interval", "f": {"value": 1, "low": 0, "high": 2, "method": "", "extra": 1}},
    {"$f": "1e999"}, {"$t": "abc"}, {"$a": "object", "s": [1], "v": [1]},
    {"$a": "int64", "s": [3], "v": [1, 2]}, {"unknown": 1}, float("nan"),
])
def test_decode_refuses_what_encode_never_writes(bad):
    with pytest.raises(RecordError):
        decode(bad)


def test_decode_bounds_nesting():
    deep = 1
    for _ in range(200):
        deep = {"$t": [deep]}
    with pytest.raises(RecordError):
        decode(deep)


def test_unencodable_values_are_not_cached(tmp_path):
    store = ResultCache(tmp_path)
    assert not store.put("k:1", object())
    assert store.get("k:1") is None


def test_default_dir_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("EAGLEKIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_dir() == tmp_path / "xdg" / "eaglekit"
    monkeypatch.setenv("EAGLEKIT_CACHE_DIR", str(tmp_path / "mine"))
    assert default_dir() == tmp_path / "mine"


def test_put_get_and_provenance(tmp_path):
    store = ResultCache(tmp_path)
    assert store.put("k:1", _figure())
    value, cached = store.get("k:1")
    assert value.by == _figure().by and cached.store == str(tmp_path)
    assert cached.computed_at.endswith("UTC") and cached.to_json()["cached"] is True


def _rows(tmp_path):
    return sqlite3.connect(str(tmp_path / STORE / "cache.db"))


def test_a_corrupt_entry_is_dropped_and_recomputed(tmp_path):
    store = ResultCache(tmp_path)
    store.put("k:1", _figure())
    store.close()
    with _rows(tmp_path) as db:
        db.execute("UPDATE Cache SET value = ? WHERE key = ?", (b"\x78\x9c garbage", "k:1"))
    calls = []

    def compute():
        calls.append(1)
        return Interval(1.0, 0.5, 1.5, "fresh")
    got = cached_call("k", 1, lambda s: {"a": 1}, compute, cache_dir=tmp_path)
    assert calls == [1] and got.method == "fresh"
    assert ResultCache(tmp_path).get("k:1") is None  # the bad row was dropped


def test_a_pickled_entry_is_never_unpickled(tmp_path):
    """A row of diskcache's pickle mode (what a default diskcache would write, or a planted one): refused, the
    answer recomputed, and the pickle's payload never runs."""
    marker = tmp_path / "ran"
    store = ResultCache(tmp_path)
    k = key("k", 1, {"a": 1})
    store.put(k, Interval(9.0, 9.0, 9.0, "old"))
    store.close()
    payload = pickle.dumps(_Exploit(str(marker)))
    with _rows(tmp_path) as db:
        db.execute("UPDATE Cache SET value = ?, mode = 4 WHERE key = ?", (payload, k))
    got = cached_call("k", 1, lambda s: {"a": 1}, lambda: Interval(1.0, 1.0, 1.0, "fresh"), cache_dir=tmp_path)
    assert got.method == "fresh" and not marker.exists()


class _Exploit:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_an_entry_file_behind_a_link_or_outside_the_store_is_not_read(tmp_path):
    store = ResultCache(tmp_path)
    k = key("k", 1, {"a": 2})
    store.put(k, Interval(2.0, 2.0, 2.0, "old"))
    store.close()
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    (tmp_path / STORE / "ab" / "cd").mkdir(parents=True)
    planted = "ab/cd/" + "0" * 28 + ".val"
    (tmp_path / STORE / planted).symlink_to(secret)
    for name in (planted, "../secret.txt", str(secret)):
        with _rows(tmp_path) as db:
            db.execute("UPDATE Cache SET value = NULL, filename = ?, mode = 2 WHERE key = ?", (name, k))
        assert ResultCache(tmp_path).get(k) is None
        with _rows(tmp_path) as db:  # dropped: put the row back for the next case
            if db.execute("SELECT COUNT(*) FROM Cache WHERE key = ?", (k,)).fetchone()[0] == 0:
                ResultCache(tmp_path).put(k, Interval(2.0, 2.0, 2.0, "old"))
    assert secret.read_text() == "not yours"


def test_an_entry_for_another_key_is_not_trusted(tmp_path):
    store = ResultCache(tmp_path)
    store.put("k:a", Interval(1.0, 1.0, 1.0, "a"))
    store.close()
    with _rows(tmp_path) as db:
        value = db.execute("SELECT value FROM Cache WHERE key = 'k:a'").fetchone()[0]
        db.execute("UPDATE Cache SET key = 'k:b' WHERE key = 'k:a'")
    assert value and ResultCache(tmp_path).get("k:b") is None


def test_an_unusable_store_computes_instead(tmp_path):
    (tmp_path / STORE).mkdir()
    (tmp_path / STORE / "cache.db").write_bytes(b"this is not sqlite" * 100)
    store = ResultCache(tmp_path)
    got = cached_call("k", 1, lambda s: {"a": 1}, lambda: 42, cache_dir=tmp_path)
    assert got == 42 and (store.problem is None or "unusable" in store.problem)


def test_keys_follow_content_not_names(tmp_path):
    store = ResultCache(tmp_path / "cache")
    a = tmp_path / "a"
    a.mkdir()
    (a / "config.json").write_text('{"x": 1}')
    (a / "w.bin").write_bytes(b"\0" * 1000)
    b = tmp_path / "b"
    b.mkdir()
    (b / "config.json").write_text('{"x": 1}')
    (b / "w.bin").write_bytes(b"\0" * 1000)
    assert store.location_digest(a) == store.location_digest(b)            # a copy elsewhere: the same key
    (b / "w.bin").write_bytes(b"\0" * 999 + b"\1")
    assert store.location_digest(a) != store.location_digest(b)            # one byte: another key
    assert key("acceptance", 1, {"p": 1}) != key("acceptance", 2, {"p": 1})  # a code version bump: another key
    assert key("acceptance", 1, {"p": 1}) != key("acceptance", 1, {"p": 2})


def test_a_large_file_is_keyed_in_bounded_time_by_its_ends(tmp_path, monkeypatch):
    import eaglekit.io.cache as cache

    monkeypatch.setattr(cache, "FULL_HASH_BYTES", 4096)
    monkeypatch.setattr(cache, "EDGE_BYTES", 1024)
    store = ResultCache(tmp_path / "cache")
    big = tmp_path / "shard.safetensors"
    big.write_bytes(b"a" * 10_000)
    first = store.file_digest(big)
    data = bytearray(big.read_bytes())
    data[-1] = ord("b")                    # the last MiB changed: another key
    big.write_bytes(bytes(data))
    assert store.file_digest(big) != first
    stat = big.stat()
    import os
    os.utime(big, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))   # touched: another key
    assert store.file_digest(big) not in (first,)
