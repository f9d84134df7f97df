"""The record ``eaglekit check`` returns: findings, each with a one-line fix, and the verdict per engine release.

Shared by the EAGLE-3 checks (:mod:`eaglekit.analysis.compat.check`) and the block drafters' checks
(:mod:`eaglekit.analysis.compat.block_check`), so both render and serialise alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Literal

from eaglekit.core.configs.aux_view import AuxEngineView
from eaglekit.core.configs.block import BlockDrafterConfig
from eaglekit.core.configs.config import DrafterConfig
from eaglekit.core.configs.engine_readings import parse_engine
from eaglekit.core.render import ansi, html_badge, html_table, use_colour

Severity = Literal["error", "warning", "ok", "info"]
Engine = Literal["sglang", "vllm"]
Status = Literal["READY", "UNSURE", "NOT READY"]
EXIT_READY, EXIT_NOT_READY = 0, 4
_COLOUR = {"error": "red", "warning": "yellow", "ok": "green", "info": "grey"}


@dataclass(frozen=True)
class Finding:
    """One check's outcome; ``fix`` is one line saying what to do (empty when nothing is to do).
    ``engine``: the engine (``"vllm"``) or engine release reading (``"sglang<25454"``) it concerns, None
    for every engine."""

    check: str
    severity: Severity
    message: str
    fix: str = ""
    engine: str | None = None

    def to_json(self) -> dict:
        return {"check": self.check, "severity": self.severity, "message": self.message, "fix": self.fix,
                "engine": self.engine}


@dataclass(frozen=True)
class EmbedComparison:
    """embed_tokens.weight of the drafter against the target's, row by row (``rows`` compared)."""

    rows: int
    total_rows: int
    differing: int
    first_differing: int | None
    full: bool
    note: str = ""

    def to_json(self) -> dict:
        return dict(vars(self))


@dataclass(frozen=True)
class CheckReport:
    """Every pre-serving finding for one drafter (and a target). Ready when no finding is an error."""

    drafter: str
    target: str | None
    engines: tuple[str, ...]
    findings: tuple[Finding, ...]
    config: DrafterConfig | BlockDrafterConfig | None = None  # a block drafter's (DFlash, DFlash2, DSpark) config
    aux: AuxEngineView | None = None
    embed: EmbedComparison | None = field(default=None)

    @property
    def ready(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "warning")

    @property
    def exit_code(self) -> int:
        return EXIT_READY if self.ready else EXIT_NOT_READY

    def by_check(self, check: str) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.check == check)

    def status(self, engine: str) -> tuple[Status, str]:
        """(verdict, why) for one engine release reading (a key of ``aux.engines``) or engine name:
        NOT READY when an error concerns it (or every engine), or when a fault of that engine is only a
        warning because no --engine was given; UNSURE when its aux ids are ambiguous; else READY."""
        name = engine.split("<")[0].split(">")[0]
        mine = [f for f in self.findings if f.engine in (None, engine, name) and f.severity in ("error", "warning")]
        faults = [f for f in mine if f.severity == "error" or (f.engine is not None and "ambiguous" not in f.message)]
        if faults:
            return "NOT READY", ", ".join(dict.fromkeys(f.check for f in faults))
        if any(f.engine is not None for f in mine):
            return "UNSURE", "aux ids ambiguous"
        return "READY", ""

    @property
    def verdicts(self) -> tuple[tuple[str, str, Status, str], ...]:
        """(key, name, verdict, why) per engine release reading, in the order of ``aux.engines``."""
        if self.aux is not None and self.aux.engines:
            named = [(e.key, e.name + (f" ({e.releases})" if e.key == e.engine and e.engine == "sglang" else ""))
                     for e in self.aux.engines]
        else:
            named = [(e, parse_engine(e).label) for e in self.engines]
        return tuple((key, name, *self.status(key)) for key, name in named)

    @property
    def verdict_line(self) -> str:
        """The verdicts alone, as the first line gives them: NOT READY with the count of errors every engine
        shares, else the verdict per engine release ("UNSURE for SGLang since #25454 (aux ids ambiguous); ...")."""
        common = [f for f in self.errors if f.engine is None]
        if common:
            return f"NOT READY ({len(common)} error{'s' if len(common) != 1 else ''})"
        return "; ".join(f"{verdict} for {name}" + (f" ({why})" if why else "")
                         for _, name, verdict, why in self.verdicts)

    @property
    def summary(self) -> str:
        """The first line: the verdict per engine release, each named with the releases it means."""
        where = f" for target {self.target}" if self.target else " (no target given: target checks skipped)"
        if any(f.engine is None for f in self.errors):
            head = f"{self.drafter}: {self.verdict_line}{where}"
        else:
            head = f"{self.drafter}{where}: {self.verdict_line}"
        return head + (f"; {len(self.warnings)} warning{'s' if len(self.warnings) != 1 else ''}" if self.warnings else "")

    def to_json(self) -> dict:
        return {"drafter": self.drafter, "target": self.target, "engines": list(self.engines), "ready": self.ready,
                "summary": self.summary,
                "verdicts": [{"engine": k, "name": n, "verdict": v, "why": w} for k, n, v, w in self.verdicts],
                "findings": [f.to_json() for f in self.findings],
                "aux": self.aux.to_json() if self.aux else None,
                "embed": self.embed.to_json() if self.embed else None,
                "config": self.config.to_json() if self.config else None}

    def _rows(self, badge) -> list[list[str]]:
        order = {"error": 0, "warning": 1, "info": 2, "ok": 3}
        return [[badge(f.severity), f.check, f.message, f.fix]
                for f in sorted(self.findings, key=lambda f: order[f.severity])]

    def __str__(self) -> str:
        colour = use_colour()
        order = {"error": 0, "warning": 1, "info": 2, "ok": 3}
        lines = [self.summary]
        for f in sorted(self.findings, key=lambda f: order[f.severity]):
            lines.append(f"  {ansi(f'{f.severity:<7}', _COLOUR[f.severity], enabled=colour)} {f.check}: {f.message}")
            if f.fix and f.severity != "ok":
                lines.append(f"  {'':7}   fix: {f.fix}")
        if self.aux is not None:
            lines += ["", str(self.aux)]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        parts = [f"<div class='eaglekit-check'><p><b>{escape(self.summary)}</b></p>",
                 html_table(["", "check", "finding", "fix"], self._rows(lambda s: html_badge(s, _COLOUR[s])),
                            caption="Pre-serving checks")]
        if self.aux is not None:
            parts.append(self.aux._repr_html_())
        return "".join(parts) + "</div>"


__all__ = ["CheckReport", "EmbedComparison", "Finding", "Severity", "Status", "EXIT_READY", "EXIT_NOT_READY"]
