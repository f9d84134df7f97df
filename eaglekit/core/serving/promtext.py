"""An engine's Prometheus ``/metrics`` page, read into samples with bounds set before the parser sees it.

prometheus_client's text parser (``text_string_to_metric_families``) does the parsing, never by hand; but it is
quadratic in a line's length, so a hostile page is bounded first (:func:`bounded_text`): no line longer than
:data:`MAX_LINE_CHARS`, no sample with more than :data:`MAX_LABELS` labels, nothing after OpenMetrics' ``# EOF``
line (what follows it is not part of the exposition). :func:`samples` then yields every sample once: a page that
lists one series twice (the same name and label set, in any label order) is refused, naming the series, since
summing it would count it twice and no engine's registry writes one.

A series is named by its labels as a sorted tuple of pairs (:data:`LabelKey`): label order does not matter.
"""

from __future__ import annotations

from collections.abc import Iterator

from eaglekit.core.errors import InputError
from eaglekit.core.redact import shown

__all__ = ["LabelKey", "MAX_FAMILIES", "MAX_LABELS", "MAX_LINE_CHARS", "MAX_SAMPLES", "bounded_text", "label_key",
           "samples", "series_name"]

#: A series' labels, sorted: ``(("engine", "0"), ("model_name", "m"))``.
LabelKey = tuple[tuple[str, str], ...]

#: Metric families a /metrics text may hold before it is refused (vLLM serves about 60, SGLang about 100).
MAX_FAMILIES = 20_000
#: Label sets (samples) in all.
MAX_SAMPLES = 200_000
#: Longest line (an engine's longest, a HELP text or a histogram bucket, is a few hundred characters).
MAX_LINE_CHARS = 64 * 1024
#: Most labels on one sample (vLLM's and SGLang's carry at most about ten).
MAX_LABELS = 64


def label_key(labels: dict[str, str]) -> LabelKey:
    return tuple(sorted(labels.items()))


def series_name(name: str, key: LabelKey) -> str:
    """``name{a="1",b="2"}``, shortened for a message."""
    text = name + "{" + ",".join(f'{k}="{v}"' for k, v in key) + "}"
    return shown(text if len(text) <= 160 else text[:157] + "...")


def bounded_text(text: str, what: str) -> str:
    """``text`` up to its ``# EOF`` line, once every line is within :data:`MAX_LINE_CHARS` and every sample line
    within :data:`MAX_LABELS` labels; one line of refusal otherwise."""
    out: list[str] = []
    for n, line in enumerate(text.split("\n"), 1):
        if line.rstrip("\r") == "# EOF":  # OpenMetrics: the exposition ends here
            break
        if len(line) > MAX_LINE_CHARS:
            raise InputError(f"{what}: line {n:,} is {len(line):,} characters long (at most {MAX_LINE_CHARS:,}); "
                             "not an engine's /metrics.")
        if not line.startswith("#") and line.count("=") > MAX_LABELS:
            raise InputError(f"{what}: line {n:,} has more than {MAX_LABELS} labels; not an engine's /metrics.")
        out.append(line)
    return "\n".join(out).rstrip("\n") + "\n"


def samples(text: str, what: str) -> Iterator:
    """Every sample of a bounded page once (prometheus_client ``Sample``s); duplicates and pages past
    :data:`MAX_FAMILIES` families or :data:`MAX_SAMPLES` samples are refused."""
    from prometheus_client.parser import text_string_to_metric_families  # loaded on use: start-up stays fast

    families = count = 0
    seen: set[tuple[str, LabelKey]] = set()
    try:
        for fam in text_string_to_metric_families(bounded_text(text, what)):
            families += 1
            if families > MAX_FAMILIES:
                raise InputError(f"{what}: more than {MAX_FAMILIES:,} metric families; not an engine's /metrics "
                                 "(vLLM and SGLang serve about 100).")
            for s in fam.samples:
                count += 1
                if count > MAX_SAMPLES:
                    raise InputError(f"{what}: more than {MAX_SAMPLES:,} samples; not an engine's /metrics.")
                key = (s.name, label_key(s.labels))
                if key in seen:
                    raise InputError(f"{what}: the series {series_name(*key)} is listed twice; an engine's page lists "
                                     "each series once (summing it would count it twice).")
                seen.add(key)
                yield s
    except InputError:
        raise
    except Exception as e:  # the parser raises ValueError, KeyError, IndexError on malformed lines
        raise InputError(f"{what}: not Prometheus text exposition format ({type(e).__name__}: "
                         f"{shown(str(e))[:120]}); point at the engine's /metrics endpoint.") from e
