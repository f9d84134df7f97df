"""Metrics pages as vLLM and SGLang serve them, and a loopback server that misbehaves on demand, for ``eaglekit live``.

A plain module (``from livefixtures import ...``). The honest pages are written as the engines' prometheus_client
registries write them; the names, help texts and labels are those of:

- vLLM ``vllm/v1/spec_decode/metrics.py`` (``SpecDecodingProm``) and ``vllm/v1/metrics/loggers.py``
  (``PrometheusStatLogger``: labels ``model_name``, ``engine``), with the example page of vLLM's
  ``docs/design/metrics.md`` (``vllm:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 27453.0``);
- SGLang ``python/sglang/srt/metrics/collector.py`` (``TokenizerMetricsCollector``: ``sglang:generation_tokens_total``,
  ``sglang:num_requests_total``, ``sglang:spec_verify_calls_total``; ``SchedulerMetricsCollector``:
  ``sglang:spec_accept_length``, ``sglang:num_running_reqs``);
- SGLang's decode log line, ``scheduler_metrics_mixin.py`` ``log_decode_stats``: ``Decode batch, #running-req: N,
  #token: T, token usage: U, accept len: L, accept rate: R, cuda graph: True, gen throughput (token/s): G,
  #queue-req: Q, `` (older releases: ``Decode batch. #running-req: ...``).

:class:`LiveHostile` serves ``/MODE/metrics``; the honest modes change between scrapes as a live server's counters do.
"""

from __future__ import annotations

import functools
import gzip
import re
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from eaglekit.demo.metricsserver import VllmCounters, sglang_metrics_text, vllm_metrics_text

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _bomb(inner_bytes: int) -> bytes:
    """gzip(gzip(``inner_bytes`` of a comment line)), built in 1 MiB pieces: about 1 KiB per MiB inside."""
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)
    outer = zlib.compressobj(9, zlib.DEFLATED, 31)
    piece = b"#" * (1 << 20)
    out = [outer.compress(inner.compress(b"# "))]
    for _ in range(inner_bytes >> 20):
        out.append(outer.compress(inner.compress(piece)))
    out.append(outer.compress(inner.flush()))
    out.append(outer.flush())
    return b"".join(out)


@functools.cache
def gzip_bomb() -> bytes:
    """A body of about 1 KiB that inflates to 256 MiB (16 times the page cap) through two gzip layers."""
    return _bomb(256 << 20)


def _born(page: str, created: dict[str, float]) -> str:
    """The page with each counter series' ``_created`` timestamp set to its engine's in ``created`` (default
    1.7e9): two pages written by two registries then read as one process scraped twice, but where an engine is
    given another time (a restart)."""
    out = []
    for line in page.splitlines():
        if not line.startswith("#") and "_created{" in line:
            m = re.search(r'(?:engine|dp_rank)="([^"]*)"', line)
            line = line.rsplit(" ", 1)[0] + f" {created.get(m.group(1) if m else '0', 1.7e9)!r}"
        out.append(line)
    return "\n".join(out) + "\n"


def vllm_registry_page(engines: dict[str, VllmCounters], *, model: str = MODEL,
                       created: dict[str, float] | None = None) -> str:
    """A vLLM V1 page as its own prometheus_client registry writes it, one series per engine: names, help texts,
    labelnames ``["model_name", "engine"]`` and ``multiprocess_mode="mostrecent"`` of vllm-project/vllm
    ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``, ``per_engine_labelvalues``) and
    ``vllm/v1/spec_decode/metrics.py`` (``SpecDecodingProm``, ``position`` label per draft position). ``created``:
    an engine's counters' ``_created`` time (default 1.7e9 for all)."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

    reg = CollectorRegistry()
    names = ["model_name", "engine"]
    running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", names,
                    multiprocess_mode="mostrecent", registry=reg)
    gen = Counter("vllm:generation_tokens", "Number of generation tokens processed.", names, registry=reg)
    drafts = Counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", names, registry=reg)
    drafted = Counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", names, registry=reg)
    accepted = Counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", names, registry=reg)
    per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
                      names + ["position"], registry=reg)
    for eng, c in engines.items():
        running.labels(model, eng).set(c.running)
        gen.labels(model, eng).inc(c.generation_tokens)
        drafts.labels(model, eng).inc(c.drafts)
        drafted.labels(model, eng).inc(c.draft_tokens)
        accepted.labels(model, eng).inc(c.accepted)
        for i, v in enumerate(c.per_position):
            per_pos.labels(model, eng, str(i)).inc(v)
    return _born(generate_latest(reg).decode(), created or {})


def sglang_registry_page(*, tokenizer: dict | None = None, schedulers: dict[tuple, dict] = (),
                         model: str = MODEL) -> str:
    """An SGLang page as its prometheus_client registry writes it. ``tokenizer``: the TokenizerMetricsCollector's
    counters (``generation_tokens``, ``requests``, ``verify_calls``; None: no request has finished, so no series
    yet: prometheus_client writes a labelled counter's series only once ``.labels()`` is called). ``schedulers``:
    ``{(dp_rank, tp_rank): {gauge: value}}``, each the SchedulerMetricsCollector of one scheduler, its gauges
    ``multiprocess_mode="mostrecent"``; a ``num_running_reqs`` dict value is ``{priority: n}`` (priority
    scheduling: ``""`` holds the total). Names, help texts and labels of sgl-project/sglang
    ``python/sglang/srt/metrics/collector.py`` (``SchedulerMetricsCollector``, ``TokenizerMetricsCollector``);
    ``spec_num_steps`` and ``spec_num_draft_tokens`` are gauges of ``observability/metrics_collector.py`` in later
    releases, their help texts here eaglekit's own words."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

    reg = CollectorRegistry()
    tok = ["model_name", "engine_type"]
    counters = {k: Counter(f"sglang:{n}", h, tok, registry=reg) for k, n, h in (
        ("generation_tokens", "generation_tokens", "Number of generation tokens processed."),
        ("requests", "num_requests", "Number of requests processed."),
        ("verify_calls", "spec_verify_calls", "Number of speculative decoding verification calls."))}
    for k, v in (tokenizer or {}).items():
        counters[k].labels(model, "unified").inc(v)
    sched = ["model_name", "engine_type", "tp_rank", "pp_rank", "dp_rank"]
    helps = {"num_running_reqs": "The number of running requests.",
             "spec_accept_length": "The average acceptance length of speculative decoding.",
             "spec_accept_rate": "The average acceptance rate of speculative decoding (`accepted tokens / total "
                                 "draft tokens` in batch).",
             "spec_num_steps": "The number of speculative decoding steps.",
             "spec_num_draft_tokens": "The number of speculative decoding draft tokens."}
    gauges: dict[str, Gauge] = {}
    for (dp, tp), values in dict(schedulers).items():
        for k, v in values.items():
            prio = isinstance(v, dict)
            if k not in gauges:
                gauges[k] = Gauge(f"sglang:{k}", helps[k], sched + (["priority"] if prio else []),
                                  multiprocess_mode="mostrecent", registry=reg)
            for p, x in (v.items() if prio else [(None, v)]):
                labels = [model, "unified", str(tp), "0", str(dp)] + ([p] if prio else [])
                gauges[k].labels(*labels).set(x)
    return _born(generate_latest(reg).decode(), {})

#: Two scrapes of a vLLM server, 3 draft steps: the difference is 500 drafts, 1500 draft tokens, 830 accepted
#: (355, 265, 210 by position), 2000 generated tokens.
VLLM_BEFORE = VllmCounters(1000, 3000, 1660, (710, 530, 420), 27453, running=6)
VLLM_AFTER = VllmCounters(1500, 4500, 2490, (1065, 795, 630), 29453, running=10)
#: Two scrapes of an SGLang server: 40 requests finished, 2 440 generated tokens, 800 verify calls.
SGLANG_BEFORE = dict(generation_tokens=10_000, requests=100, verify_calls=3_000, accept_length_gauge=3.1, running=4)
SGLANG_AFTER = dict(generation_tokens=12_440, requests=140, verify_calls=3_800, accept_length_gauge=2.9, running=8)

def _streaky(scrapes: int, per: int = 400) -> list[VllmCounters]:
    """Cumulative counters whose successive windows of ``per`` drafts accept all 3 tokens, then none, in turn."""
    out, d, acc = [], 1000, 0
    for i in range(scrapes):
        out.append(VllmCounters(d, 3 * d, 3 * acc, (acc, acc, acc), d + 3 * acc))
        d, acc = d + per, acc + (per if i % 2 == 0 else 0)
    return out


#: Six scrapes (five sub-windows) of a server whose requests are all easy or all hard together.
STREAKY = _streaky(6)

SGLANG_LOG = """\
[2025-06-18 10:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 128, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0,
[2025-06-18 10:00:04 TP0] Decode batch. #running-req: 2, #token: 300, token usage: 0.01, accept len: 3.00, cuda graph: True, gen throughput (token/s): 150.00, #queue-req: 0
[2025-06-18 10:00:08 TP0] Decode batch, #running-req: 4, #token: 900, token usage: 0.02, accept len: 2.50, accept rate: 0.50, cuda graph: True, gen throughput (token/s): 250.00, #queue-req: 0, 
[2025-06-18 10:00:10 TP0] Decode batch, #running-req: 0, #token: 0, token usage: 0.00, accept len: 0.00, accept rate: 0.00, cuda graph: True, gen throughput (token/s): 0.00, #queue-req: 0, 
[2025-06-18 10:00:12 TP0] Decode batch, #running-req: 2, #token: 950, token usage: 0.02, accept len: 2.00, accept rate: 0.33, cuda graph: True, gen throughput (token/s): 200.00, #queue-req: 0, 
"""


def vllm_pages(*counters: VllmCounters, **kw) -> list[str]:
    return [vllm_metrics_text(c, **kw) for c in counters]


def _endless_families(n: int) -> bytes:
    return "".join(f"# TYPE fam_{i} gauge\nfam_{i} 1\n" for i in range(n)).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args) -> None:
        pass

    def do_GET(self) -> None:
        app = self.server.app
        mode = self.path.strip("/").split("/")[0]
        n = app.record(mode, self.headers.get("Authorization"))
        try:
            getattr(self, f"m_{mode}", self.m_missing)(n)
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def send(self, body: bytes, status: int = 200, headers: dict | None = None) -> None:
        self.send_response(status)
        for k, v in {"Content-Type": "text/plain; version=0.0.4", "Content-Length": str(len(body)),
                     **(headers or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def m_missing(self, n: int) -> None:
        self.send(b"not found", 404)

    def m_vllm(self, n: int) -> None:  # honest: before, then after
        self.send(vllm_pages(VLLM_BEFORE, VLLM_AFTER)[min(n, 1)].encode())

    def m_sglang(self, n: int) -> None:
        self.send(sglang_metrics_text(**(SGLANG_BEFORE if n == 0 else SGLANG_AFTER)).encode())

    def m_restart(self, n: int) -> None:  # a restart between scrapes 0 and 1, then honest counters from zero
        pages = vllm_pages(VLLM_AFTER, VllmCounters(10, 30, 20, (10, 6, 4), 50),
                           VllmCounters(510, 1530, 850, (365, 271, 214), 2050))
        self.send(pages[min(n, 2)].encode())

    def m_down(self, n: int) -> None:  # counters that go down at every scrape
        self.send(vllm_pages(VllmCounters(10_000 - n, 30_000 - 3 * n, 100, (50, 30, 20), 99))[0].encode())

    def m_nan(self, n: int) -> None:
        self.send(vllm_metrics_text(VLLM_BEFORE).replace("1660.0", "NaN").encode())

    def m_negative(self, n: int) -> None:
        self.send(vllm_metrics_text(VLLM_BEFORE).replace("1660.0", "-1660.0").encode())

    def m_nolabel(self, n: int) -> None:
        self.send(vllm_metrics_text(VLLM_BEFORE).replace(',position="1"', "").encode())

    def m_many(self, n: int) -> None:  # 100 000 metric families
        self.send(_endless_families(100_000))

    def m_huge(self, n: int) -> None:  # an endless body, no Content-Length
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk = b"# padding " + b"x" * 65_536 + b"\n"
        for _ in range(100_000):  # 6.5 GB at most; the client hangs up long before
            self.wfile.write(chunk)

    def m_trickle(self, n: int) -> None:  # headers at once, then one byte every 0.5 s
        body = vllm_metrics_text(VLLM_BEFORE).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for b in body:
            if self.server.app.stopping.is_set():
                return
            self.wfile.write(bytes([b]))
            self.wfile.flush()
            time.sleep(0.5)

    def m_redirect(self, n: int) -> None:  # to another host (the test's second server)
        self.send(b"", 302, {"Location": f"{self.server.app.elsewhere}/vllm/metrics"})

    def m_local(self, n: int) -> None:  # to the same host, another path
        self.send(b"", 302, {"Location": "/vllm/metrics"})

    def m_streaky(self, n: int) -> None:  # sub-windows alternately all accepted and none: correlated drafts
        self.send(vllm_metrics_text(STREAKY[min(n, len(STREAKY) - 1)]).encode())

    def m_gzip(self, n: int) -> None:  # honest, gzipped once
        self.send(gzip.compress(vllm_pages(VLLM_BEFORE, VLLM_AFTER)[min(n, 1)].encode()), 200,
                  {"Content-Encoding": "gzip"})

    def m_gzipbomb(self, n: int) -> None:  # "gzip, gzip": a small body whose inner layer is 256 MiB of comment
        self.send(gzip_bomb(), 200, {"Content-Encoding": "gzip, gzip"})

    def m_duplicate(self, n: int) -> None:  # every series twice, labels reordered the second time
        page = vllm_metrics_text(VLLM_BEFORE)
        again = [line.replace('engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"',
                              'model_name="meta-llama/Llama-3.1-8B-Instruct",engine="0"')
                 for line in page.splitlines() if not line.startswith("#")]
        self.send((page + "\n".join(again) + "\n").encode())

    def m_longline(self, n: int) -> None:  # a 4 MB comment line (prometheus_client's parser is quadratic)
        self.send(("# " + "x" * 4_000_000 + "\n" + vllm_metrics_text(VLLM_BEFORE)).encode())

    def m_notmetrics(self, n: int) -> None:
        self.send(b"<html><body>{not: metrics}</body></html>")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    app: LiveHostile

    def handle_error(self, request, client_address) -> None:
        pass


class LiveHostile:
    """``with LiveHostile() as s: s.url("vllm")`` -> ``http://127.0.0.1:PORT/vllm/metrics``. ``log`` holds
    (mode, Authorization header or None) per request; each mode counts its own scrapes."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str | None]] = []
        self.elsewhere = ""
        self.stopping = threading.Event()
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.app = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    def record(self, mode: str, auth: str | None) -> int:
        with self._lock:
            self.log.append((mode, auth))
            n = self._counts.get(mode, 0)
            self._counts[mode] = n + 1
            return n

    @property
    def endpoint(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, mode: str) -> str:
        return f"{self.endpoint}/{mode}/metrics"

    def __enter__(self) -> LiveHostile:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
