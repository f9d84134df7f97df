"""A loopback server replaying an engine's ``/metrics``: the counters move on at every scrape, as a live one's do.

The texts are written as the engines' own prometheus_client registries write them (HELP and TYPE lines, a
``_total`` sample and a ``_created`` one per counter, labels ``model_name`` and ``engine``):

- vLLM: names, help texts and labels of ``vllm/v1/spec_decode/metrics.py`` (``SpecDecodingProm``: drafts, draft
  tokens, accepted tokens, accepted tokens per position with ``position="0"``...) and ``vllm/v1/metrics/loggers.py``
  (``vllm:generation_tokens``, ``vllm:num_requests_running``), as in the example output of vLLM's
  ``docs/design/metrics.md``;
- SGLang: ``python/sglang/srt/metrics/collector.py`` (``sglang:generation_tokens_total``,
  ``sglang:num_requests_total``, ``sglang:spec_verify_calls_total`` counted per finished request, the gauges
  ``sglang:spec_accept_length``, ``sglang:num_running_reqs``; labels ``model_name``, ``engine_type``, ``tp_rank``).

:func:`vllm_counters` makes a deterministic sequence of cumulative counters for a drafter whose per-step
acceptance is given; :class:`MetricsReplayServer` serves ``texts(i)`` at the i-th scrape of ``/metrics`` (the last
text again once a finite list runs out). ``server.scrapes`` counts them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from eaglekit.core.errors import InputError

__all__ = ["MetricsReplayServer", "VllmCounters", "replay_pages", "serve", "serve_metrics_replay",
           "sglang_metrics_text", "vllm_counters", "vllm_metrics_text"]

_CREATED = 1.7e9  # the _created timestamp prometheus_client writes beside every counter


def _counter(name: str, help_: str, rows: Sequence[tuple[str, float]]) -> list[str]:
    out = [f"# HELP {name}_total {help_}", f"# TYPE {name}_total counter"]
    out += [f"{name}_total{{{labels}}} {value:.1f}" for labels, value in rows]
    out += [f"# HELP {name}_created {help_}", f"# TYPE {name}_created gauge"]
    out += [f"{name}_created{{{labels}}} {_CREATED:.1f}" for labels, _ in rows]
    return out


def _gauge(name: str, help_: str, rows: Sequence[tuple[str, float]]) -> list[str]:
    return [f"# HELP {name} {help_}", f"# TYPE {name} gauge"] + [f"{name}{{{lab}}} {v:.1f}" for lab, v in rows]


@dataclass(frozen=True)
class VllmCounters:
    """vLLM's cumulative speculative counters at one scrape."""

    drafts: int
    draft_tokens: int
    accepted: int
    per_position: tuple[int, ...]
    generation_tokens: int
    running: int = 8


def vllm_metrics_text(c: VllmCounters, *, model: str = "meta-llama/Llama-3.1-8B-Instruct", engine: str = "0") -> str:
    """One ``/metrics`` page of a vLLM V1 server with speculative decoding."""
    lab = f'engine="{engine}",model_name="{model}"'
    lines = _gauge("vllm:num_requests_running", "Number of requests in model execution batches.", [(lab, c.running)])
    lines += _counter("vllm:generation_tokens", "Number of generation tokens processed.", [(lab, c.generation_tokens)])
    lines += _counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", [(lab, c.drafts)])
    lines += _counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", [(lab, c.draft_tokens)])
    lines += _counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", [(lab, c.accepted)])
    lines += _counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
                      [(f'{lab},position="{i}"', v) for i, v in enumerate(c.per_position)])
    return "\n".join(lines) + "\n"


def sglang_metrics_text(*, generation_tokens: int, requests: int, verify_calls: int, accept_length_gauge: float = 0.0,
                        running: int = 8, model: str = "meta-llama/Llama-3.1-8B-Instruct") -> str:
    """One ``/metrics`` page of an SGLang server with speculative decoding (``--enable-metrics``)."""
    lab = f'engine_type="unified",model_name="{model}",tp_rank="0"'
    lines = _gauge("sglang:num_running_reqs", "The number of running requests.", [(lab, running)])
    lines += [f"# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.",
              "# TYPE sglang:spec_accept_length gauge", f"sglang:spec_accept_length{{{lab}}} {accept_length_gauge}"]
    lines += _counter("sglang:generation_tokens", "Number of generation tokens processed.", [(lab, generation_tokens)])
    lines += _counter("sglang:num_requests", "Number of requests processed.", [(lab, requests)])
    lines += _counter("sglang:spec_verify_calls", "Number of speculative decoding verification calls.",
                      [(lab, verify_calls)])
    return "\n".join(lines) + "\n"


def vllm_counters(per_step: Sequence[float], *, scrapes: int, drafts_per_scrape: int = 1200,
                  start_drafts: int = 50_000, running: int = 8) -> list[VllmCounters]:
    """Cumulative counters over ``scrapes`` scrapes of a server whose drafter accepts step j (given steps 1..j-1)
    with probability ``per_step[j]``: each scrape adds ``drafts_per_scrape`` drafts, of which round(drafts x
    running product) were accepted at each position (deterministic, no sampling), one token per draft more
    for the bonus."""
    k = len(per_step)
    reach, run = [], 1.0
    for a in per_step:
        run *= a
        reach.append(run)

    def block(n: int) -> tuple[int, ...]:
        return tuple(round(n * r) for r in reach)

    out = []
    for i in range(scrapes):
        n = start_drafts + i * drafts_per_scrape
        pos = block(n)
        out.append(VllmCounters(n, n * k, sum(pos), pos, n + sum(pos) + 3 * i, running))
    return out


def replay_pages(per_step: Sequence[float], *, seed: int = 0, drafts_per_scrape: int = 1500,
                 model: str = "demo/k25-warm") -> Callable[[int], str]:
    """An endless replay: the page of the i-th scrape of a vLLM server serving a drafter whose step j is accepted
    (given steps 1..j-1) with probability ``per_step[j]``. Each scrape adds a few more or fewer drafts than
    ``drafts_per_scrape`` and samples each draft's accepted count (seeded: the same seed replays the same pages),
    so successive windows differ as a live server's do."""
    import numpy as np

    if not per_step or any(not 0 <= a <= 1 for a in per_step):
        raise InputError("per_step: one acceptance in [0, 1] per draft step")
    rng = np.random.default_rng(seed)
    k = len(per_step)
    pages: list[VllmCounters] = [VllmCounters(20_000, 20_000 * k, 0, (0,) * k, 40_000, 8)]
    lock = threading.Lock()

    def page(i: int) -> str:
        with lock:
            while len(pages) <= i:
                prev = pages[-1]
                n = int(drafts_per_scrape * rng.uniform(0.8, 1.2))
                reached = np.ones(n, dtype=bool)
                pos = []
                for a in per_step:
                    reached &= rng.random(n) < a
                    pos.append(int(reached.sum()))
                acc = sum(pos)
                pages.append(VllmCounters(prev.drafts + n, prev.draft_tokens + n * k, prev.accepted + acc,
                                          tuple(p + q for p, q in zip(prev.per_position, pos)),
                                          prev.generation_tokens + n + acc, int(rng.integers(6, 11))))
            return vllm_metrics_text(pages[i], model=model)
    return page


def serve_metrics_replay(per_step: Sequence[float], *, seed: int = 0, drafts_per_scrape: int = 1500,
                         model: str = "demo/k25-warm", port: int = 0) -> MetricsReplayServer:
    """A started :class:`MetricsReplayServer` replaying :func:`replay_pages` on 127.0.0.1:``port`` (0: a free one;
    stop it with ``.stop()``)."""
    return MetricsReplayServer(replay_pages(per_step, seed=seed, drafts_per_scrape=drafts_per_scrape,
                                            model=model), port=port).start()


def serve(per_step: Sequence[float], *, port: int = 0, seed: int = 0, model: str = "demo/k25-warm") -> None:
    """Replay until Ctrl-C (``eaglekit serve-metrics``), printing the URL and the ``eaglekit live`` line that reads it."""
    pages = replay_pages(per_step, seed=seed, model=model)
    # the prints inside suppress too: a caller may press Ctrl-C as soon as it reads the URL
    with MetricsReplayServer(pages, port=port) as server, contextlib.suppress(KeyboardInterrupt):
        print(f"Replaying vLLM's /metrics for {model} at {server.url}/metrics (Ctrl-C stops)", flush=True)
        print(f"  eaglekit live {server.url} --window 2", flush=True)
        threading.Event().wait()  # never set: until Ctrl-C


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.split("?")[0].rstrip("/") != "/metrics":
            body = b"not found"
            self.send_response(404)
        else:
            body = self.server.app._next().encode()
            self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    app: MetricsReplayServer


class MetricsReplayServer:
    """``with MetricsReplayServer(texts) as s: s.url`` (``http://127.0.0.1:PORT``; its ``/metrics`` replays).

    ``texts``: a list of pages, or a function of the scrape number (0, 1, ...) for an endless replay."""

    def __init__(self, texts: Sequence[str] | Callable[[int], str], *, port: int = 0) -> None:
        self._texts = texts
        self.scrapes = 0
        self._lock = threading.Lock()
        try:
            self._httpd = _Server(("127.0.0.1", port), _Handler)
        except OSError as e:
            raise InputError(f"Cannot listen on 127.0.0.1:{port} ({e.strerror}): pick another port, or 0 for a "
                             "free one.") from e
        self._httpd.app = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    def _next(self) -> str:
        with self._lock:
            i = self.scrapes
            self.scrapes += 1
        if callable(self._texts):
            return self._texts(i)
        return self._texts[min(i, len(self._texts) - 1)]

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> MetricsReplayServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> MetricsReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
