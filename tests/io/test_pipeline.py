"""RangePipeline: the same byte ranges as one-at-a-time reads, in order, several in flight, buffers reused."""

from __future__ import annotations

import re
import sys
import threading

import numpy as np

from eaglekit.analysis.similarity.measure import similarity
from eaglekit.analysis.similarity.plan import blocks, plan, row_bytes, select
from eaglekit.io.pipeline import RangePipeline
from eaglekit.io.reader import open_checkpoint

A, B = "hf://demo-aqmed/Kimi-K2-Instruct-eagle3", "hf://demo-team/Kimi-K2.5-eagle3-finetuned"


class _Fake:
    """A checkpoint whose reads return recognisable bytes; with ``hold``, every read waits until that many
    reads are in flight at once (or 10 s), so only a pipeline that grows its depth finishes promptly."""

    class source:
        kind = "http"

    def __init__(self, hold: int = 0) -> None:
        self.calls, self.hold, self.cond = [], hold, threading.Condition()
        self.in_flight = self.most_in_flight = 0

    def read_into(self, name, start, buffer):
        length = len(buffer)
        with self.cond:
            self.calls.append((name, start, length))
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.most_in_flight >= self.hold, timeout=10)
            self.in_flight -= 1
        buffer[:] = bytes((start + i) % 251 for i in range(length))
        return length


def test_ranges_in_order_each_once_with_reused_buffers():
    ranges = [("t", k * 100, 100 - k) for k in range(40)]
    fake = _Fake()
    pipe = RangePipeline(fake, ranges, piece_bytes=64)
    got = [bytes(view) for view in pipe]
    assert got == [bytes((s + i) % 251 for i in range(n)) for _, s, n in ranges]
    assert sorted(fake.calls) == sorted(ranges)  # exactly the ranges given: none split, merged or repeated
    assert 2 <= pipe.allocated <= pipe.max_depth + 1 and pipe.size == 100 and pipe.buffers == []  # released


def test_depth_grows_while_the_consumer_waits():
    fake = _Fake(hold=3)  # reads are answered only once three are in flight: the pipeline starts at two
    pipe = RangePipeline(fake, [("t", k, 1) for k in range(30)], max_depth=5)
    assert len(list(pipe)) == 30
    assert fake.most_in_flight >= 3 and pipe.waits >= 1


def test_sftp_like_sources_get_one_request_at_a_time():
    fake = _Fake()
    fake.source = type("S", (), {"kind": "ssh"})
    pipe = RangePipeline(fake, [("t", k, 3) for k in range(10)])
    assert len(list(pipe)) == 10 and pipe.max_depth == 1 and fake.most_in_flight == 1


def _expected_ranges(ckpt_a, ckpt_b, chunk):
    """The byte ranges (file, first, last) one-block-at-a-time streaming reads, from the plan itself."""
    keys = select(ckpt_a.inventory, ckpt_b.inventory, None)
    from eaglekit.analysis.similarity.measure import _read_d2t

    todo = plan(ckpt_a.inventory, ckpt_b.inventory, keys=keys, grid=(64, 64), d2t=(_read_d2t(ckpt_a), _read_d2t(ckpt_b)))
    out = {0: [], 1: []}
    for side, ckpt in enumerate((ckpt_a, ckpt_b)):  # lm_head rows are paired by d2t: read whole, once
        d2t = ckpt.inventory["d2t"]
        out[side].append((d2t.file, d2t.offset, d2t.offset + d2t.nbytes - 1))
    for job in todo.jobs:
        for blk in blocks(job, chunk):
            for side, (t, span) in enumerate(((job.a, blk.span_a), (job.b, blk.span_b))):
                rb = row_bytes(t, job.width)
                begin = t.offset + span[0] * rb
                out[side].append((t.file, begin, begin + (span[1] - span[0]) * rb - 1))
    return out


def test_remote_similarity_requests_exactly_the_planned_ranges(demo, hub):
    """Pipelined over the loopback Hub: every data request is one planned block range, each once."""
    chunk = 64 * 1024  # many blocks per tensor at demo scale, so several are in flight
    with open_checkpoint(A, endpoint=hub.endpoint) as ca, open_checkpoint(B, endpoint=hub.endpoint) as cb:
        expected = _expected_ranges(ca, cb, chunk)
        hub.clear_log()
        switch = sys.getswitchinterval()
        r = similarity(ca, cb, endpoint=hub.endpoint, progress=False, chunk_bytes=chunk,
                       tensors=[k for k in select(ca.inventory, cb.inventory, None) if k not in ("d2t", "t2d")])
        log = hub.log
    assert sys.getswitchinterval() == switch  # shortened while reader threads ran, restored after
    for side, repo in enumerate((A, B)):
        repo_path = "/" + repo.removeprefix("hf://") + "/resolve/"
        got = sorted((x.path.rsplit("/", 1)[1], *map(int, re.fullmatch(r"bytes=(\d+)-(\d+)", x.range).groups()))
                     for x in log if x.path.startswith(repo_path) and x.path.endswith(".safetensors"))
        assert got == sorted(expected[side]), f"side {side}"
        assert sum(e - s + 1 for _, s, e in got) == r.bytes_read[side]
    local = similarity(demo.drafter("k2"), demo.drafter("k25-finetuned"), progress=False,
                       tensors=[t.tensor for t in r.tensors])
    for x, y in zip(r.tensors, local.tensors):
        np.testing.assert_array_equal(x.sums, y.sums)
