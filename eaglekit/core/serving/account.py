"""One throughput account of a speculative-decoding deployment, told the same way on every page.

Two models of the draft-verify cycle meet in practice, and they disagree unless both are stated:

- **verify only**: the cycle is the target's verify time, drafting counted free and the chain
  unbounded. The seed account's arithmetic is this model: 30 ms x 82 tok/s = break-even 2.46,
  150 tok/s needs 4.5, 200 tok/s needs 6.0.
- **measured**: the cycle is what the measured throughput implies, accept length / speculative
  tok/s (2.0 / 60 tok/s = 33.3 ms). What exceeds the verify time is drafting and per-cycle
  overhead: with the deployment's k draft steps, (33.3 - 30) / 2 = 1.67 ms per step. Here
  break-even is 2.73, and k steps emit at most k + 1 tokens per cycle.

:class:`Account` holds both, with what each target throughput needs at the deployment's steps
(:class:`Reach`: reachable or not, what draft cost or how many steps would reach it, or that none
can) and what an expected accept length would give (:class:`Projection`). The notebooks, the
conclusion of the investigation and ``eaglekit speedup --spec-tps`` all render this one record.
Arithmetic: :mod:`eaglekit.core.speedup.specmath` (Leviathan et al. 2023; accept length counts the bonus token).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from eaglekit.core.errors import InputError
from eaglekit.core.render import html_table, kv_html, text_table
from eaglekit.core.serving.costmodel import (
    GPUS,
    CostModel,
    ModelShape,
    Point,
    calibrate,
    check_parallel,
    parse_split,
    shape_from_config,
    split_name,
    split_verify,
)
from eaglekit.core.serving.cyclefit import RUN_NOISE
from eaglekit.core.uncertainty import Verdict
from eaglekit.core.serving.published import published
from eaglekit.core.speedup.specmath import (
    Reach,
    Scenario,
    alpha_for_accept_length,
    break_even_accept_length,
    check_accept_length,
    check_steps,
    fit_from_measurements,
    needed_accept_length,
    reach,
    throughput,
)

__all__ = ["Account", "Fork", "Projection"]


@dataclass(frozen=True)
class Projection:
    """Throughput an expected accept length gives at the fewest steps that allow it (at least the deployment's), or at
    the k it was measured at (``given_steps``)."""

    accept_length: float
    steps: int
    cycle_ms: float
    tokens_per_s: float
    speedup: float
    given_steps: bool = False  # priced at the k it was measured at, not the fewest that allow it

    def sentence(self, account: Account) -> str:
        word = "faster" if self.speedup > 1 else "slower"
        more = ("" if self.steps == account.steps or self.given_steps
                else f" needs at least {self.steps} draft steps; there it")
        return (f"Accept length {self.accept_length:g}{more} gives {self.tokens_per_s:.0f} tok/s at k = {self.steps} "
                f"(cycle {self.cycle_ms:.1f} ms = verify {account.verify_ms:g} + {self.steps} x "
                f"{account.draft_ms:.2f} ms drafting{account._overhead_words()}), {abs(self.speedup - 1):.0%} {word} "
                f"than {account.baseline_tps:g} tok/s without speculation.")


#: Draft steps the growing-verify account looks at (k = 1 .. this).
GROWTH_STEPS = 8


@dataclass(frozen=True)
class GrowingVerify:
    """The deployment's targets and expected accept lengths priced again with a verify that grows with k.

    ``verify_ms[k - 1]`` is the verify of k drafts (k + 1 tokens) at batch 1: a model of ``label``'s forward
    (:mod:`eaglekit.core.serving.costmodel`: bytes of the distinct experts the tokens route to, compute per token,
    what the measured verify holds beyond them) calibrated to the deployment's decode step (1 / baseline tok/s)
    and its verify (exact at the measured k). The calculator's verify growth is the line through the measured k
    and k + 1 (:attr:`slope_ms`, anchored at k). ``targets`` pairs each target tok/s with the steps the
    constant-verify arithmetic asks for (None: none); ``expected`` pairs each expected accept length with the
    steps it is priced at.
    """

    label: str
    verify_ms: tuple[float, ...]
    draft_ms: float
    overhead_ms: float
    measured_steps: int
    baseline_tps: float
    targets: tuple[tuple[float, int | None], ...]
    expected: tuple[tuple[float, int], ...]
    split: float = 0.0  # the share of the verify's excess over bytes and FLOPs paid per forward (0: per token)
    tp: int = 1
    excess_ms: float = 0.0  # what the measured verify holds beyond bytes and FLOPs, per verify forward

    @property
    def reading(self) -> str:
        """``per-token``, ``per-forward`` or the fraction (:func:`~eaglekit.core.serving.costmodel.split_name`)."""
        return split_name(self.split)

    def break_even(self, k: int) -> float:
        """Break-even accept length at ``k`` steps on this cycle (cycle x baseline tok/s / 1000)."""
        return self.cycle_ms(k) * self.baseline_tps / 1000.0

    def cycle_ms(self, k: int) -> float:
        return self.verify_ms[k - 1] + k * self.draft_ms + self.overhead_ms

    @property
    def slope_ms(self) -> float:
        """What the verify grows from the measured k to k + 1 (what the calculator takes): its line meets the curve
        at both, the next step the deployment would try, and drifts from it by under 1% out to k = 8."""
        k = self.measured_steps
        return self.verify_ms[k] - self.verify_ms[k - 1]

    def ceiling_tps(self, k: int) -> float:
        """Every draft accepted: k + 1 tokens per cycle."""
        return (k + 1) * 1000.0 / self.cycle_ms(k)

    def steps_for(self, target_tps: float) -> int | None:
        """The fewest steps that reach ``target_tps``, or None up to :data:`GROWTH_STEPS`."""
        return next((k for k in range(1, len(self.verify_ms) + 1)
                     if target_tps * self.cycle_ms(k) / 1000.0 <= k + 1 + 1e-9), None)

    def tokens_per_s(self, accept_length: float, k: int) -> float:
        return accept_length * 1000.0 / self.cycle_ms(k)

    def sentence(self) -> str:
        top = len(self.verify_ms)
        shown = sorted({3, 5, top, *(c for _, c in self.targets if c and c <= top),
                        *(m for _, m in self.expected if m <= top)} - {self.measured_steps})
        ks = ", ".join(str(k) for k in shown[:-1]) + f" and {shown[-1]}"
        ms = ", ".join(f"{self.verify_ms[k - 1]:.1f}" for k in shown[:-1]) + f" and {self.verify_ms[shown[-1] - 1]:.1f}"
        parts = [f"With a verify that grows with k ({self.label} on TP {self.tp}: a cost model of its forward from its "
                 f"config, calibrated to the {1000.0 / self.baseline_tps:.1f} ms decode step and the "
                 f"{self.verify_ms[self.measured_steps - 1]:g} ms verify at k = {self.measured_steps}, its excess over "
                 f"bytes and FLOPs read {self.reading}; uniform routing), the verify of k = {ks} drafts takes {ms} ms"]
        out_of_reach = []
        for t, c in self.targets:
            m = self.steps_for(t)
            const = f" (k = {c} with the verify held constant)" if c else ""
            if m is None:
                out_of_reach.append(f"{t:g} tok/s{const}")
            else:
                need = t * self.cycle_ms(m) / 1000.0
                parts.append(f"{t:g} tok/s{const} takes k = {m}, cycle {self.cycle_ms(m):.1f} ms, accept length "
                             f"{need:.2f} of at most {m + 1}")
        if out_of_reach:
            best = max(range(1, top + 1), key=self.ceiling_tps)
            verb = "is" if len(out_of_reach) == 1 else "are"
            parts.append(f"{' and '.join(out_of_reach)} {verb} out of reach at every k up to {top}: the most any k "
                         f"gives is {self.ceiling_tps(best):.0f} tok/s (k = {best}, every draft accepted)")
        for L, m in self.expected:
            tps = self.tokens_per_s(L, m)
            word = "faster" if tps > self.baseline_tps else "slower"
            parts.append(f"accept length {L:g} gives {tps:.0f} tok/s at k = {m} ({abs(tps / self.baseline_tps - 1):.0%} "
                         f"{word} than {self.baseline_tps:g} tok/s)")
        return parts[0] + ": " + "; ".join(parts[1:]) + "." if len(parts) > 1 else parts[0] + "."

    def to_json(self) -> dict[str, Any]:
        return {"target_model": self.label, "tp": self.tp, "verify_split": self.split, "reading": self.reading,
                "verify_ms": list(self.verify_ms),
                "targets": [{"tokens_per_s": t, "steps": self.steps_for(t), "constant_verify_steps": c}
                            for t, c in self.targets],
                "projections": [{"accept_length": L, "steps": m, "tokens_per_s": self.tokens_per_s(L, m)}
                                for L, m in self.expected]}


#: The most memory a GPU of the table holds (GB): a target whose weights per GPU exceed it cannot run on that TP.
LARGEST_GPU_GB = max(g.memory_gb or 0.0 for g in GPUS.values())


#: The one measurement that settles the split, as commands (``{k}`` the step to try, ``{n}`` its draft tokens):
#: SGLang's scripts/playground/bench_speculative.py (flags as its usage block gives them) and vLLM's ``bench
#: latency`` (engine arguments, ``--speculative-config`` as docs/features/speculative_decoding takes it).
SETTLE_SGLANG = ("python scripts/playground/bench_speculative.py --model-path TARGET --speculative-draft-model-path "
                 "DRAFTER --tp-size {tp} --batch-size 1 --steps {k} --topk 1 --num_draft_tokens {n}")
SETTLE_VLLM = ("vllm bench latency --model TARGET --tensor-parallel-size {tp} --batch-size 1 --input-len 2048 "
               "--output-len 128 --speculative-config '{{\"method\": \"eagle3\", \"model\": \"DRAFTER\", "
               "\"num_speculative_tokens\": {k}}}'")
#: What would move the verify under the per-forward reading: the levers the seed names.
LEVERS = ("CUDA graphs for the verify (SGLang: leave out --disable-cuda-graph and raise --cuda-graph-max-bs to the "
          "served batch; vLLM: leave out --enforce-eager) and the PCIe all-reduce (two per layer under TP: NCCL "
          "settings, or expert parallelism for the MoE layers)")


#: A point figure derived from the measured cycle carries the noise of the two throughputs it comes from (the
#: baseline's and the speculative run's, each about RUN_NOISE run to run): within this fraction of the baseline it
#: is not an answer either way.
POINT_BAND = 2 * RUN_NOISE


def _verdict(tps: float, baseline: float) -> Verdict:
    """GO / NO-GO for a point figure on the measured cycle; TOO CLOSE TO CALL within :data:`POINT_BAND` of the
    baseline, where the two measurements' own noise could turn it."""
    if abs(tps / baseline - 1) <= POINT_BAND:
        return "TOO CLOSE TO CALL"
    return "GO" if tps > baseline else "NO-GO"


@dataclass(frozen=True)
class Fork:
    """The seed's fork under both readings of its verify: what a measured verify holds beyond bytes and FLOPs is a
    cost per verified token (:attr:`per_token`) or a cost per verify forward (:attr:`per_forward`: launches without
    CUDA graphs, the all-reduces over PCIe). One decode and one verify at one k go through both; each prices every
    other k differently. The verdict under each reading, TOO CLOSE TO CALL where they disagree, and the one
    measurement that settles it."""

    per_token: GrowingVerify
    per_forward: GrowingVerify

    @property
    def steps(self) -> int:
        return self.per_token.measured_steps

    @property
    def next_k(self) -> int:
        """The step to measure: one past the deployment's."""
        return self.steps + 1

    def rows(self) -> list[dict[str, Any]]:
        """Each expected accept length at its k: tok/s and verdict under each reading, and the verdict of both."""
        out = []
        base = self.per_token.baseline_tps
        for L, k in self.per_token.expected:
            a, b = self.per_token.tokens_per_s(L, k), self.per_forward.tokens_per_s(L, k)
            va, vb = _verdict(a, base), _verdict(b, base)
            out.append({"accept_length": L, "steps": k, "per_token_tokens_per_s": a, "per_token_verdict": va,
                        "per_forward_tokens_per_s": b, "per_forward_verdict": vb,
                        "verdict": va if va == vb else "TOO CLOSE TO CALL"})
        return out

    def verdict_sentence(self) -> str:
        base = self.per_token.baseline_tps
        parts = []
        for r in self.rows():
            parts.append(f"accept length {r['accept_length']:g} at k = {r['steps']} gives "
                         f"{r['per_token_tokens_per_s']:.0f} tok/s per-token ({r['per_token_tokens_per_s'] / base - 1:+.0%}, "
                         f"{r['per_token_verdict']}) and {r['per_forward_tokens_per_s']:.0f} tok/s per-forward "
                         f"({r['per_forward_tokens_per_s'] / base - 1:+.0%}, {r['per_forward_verdict']}): {r['verdict']}")
        k = self.next_k
        return (f"Both readings of the verify ({self.per_token.label} on TP {self.per_token.tp}; the "
                f"{self.per_token.verify_ms[self.steps - 1]:g} ms verify at k = {self.steps} holds more than bytes and "
                f"FLOPs explain, as a cost per verified token or per verify forward): the verify at k = {k} is "
                f"{self.per_token.verify_ms[k - 1]:.1f} ms per-token, {self.per_forward.verify_ms[k - 1]:.1f} ms "
                f"per-forward; " + "; ".join(parts) + ".")

    def settle_sentence(self) -> str:
        k, tp = self.next_k, self.per_token.tp
        return (f"One measurement settles it: the verify at k = {k} (per-token predicts "
                f"{self.per_token.verify_ms[k - 1]:.1f} ms, per-forward {self.per_forward.verify_ms[k - 1]:.1f} ms), or "
                f"the same k = {self.steps} verify with CUDA graphs on (per-forward predicts it falls toward "
                f"{self.per_forward.verify_ms[self.steps - 1] - self._excess():.1f} ms). SGLang: "
                f"`{SETTLE_SGLANG.format(tp=tp, k=k, n=k + 1)}`; vLLM: `{SETTLE_VLLM.format(tp=tp, k=k)}` (latency "
                f"per output token x the logged mean acceptance length, minus {k} draft steps, is the verify). The "
                f"lever, if per-forward: {LEVERS}.")

    def _excess(self) -> float:
        """The per-forward reading's cost per verify forward (what graphs and the all-reduce would have to remove)."""
        return self.per_forward.excess_ms

    def answers(self) -> list[str]:
        """The fork (a better drafter: a warm start or more samples; or fix the verify first) under each reading."""
        out = []
        k = max([self.next_k] + [m for _, m in self.per_token.expected])
        for g in (self.per_token, self.per_forward):
            be = g.break_even(k)
            top = max(range(1, len(g.verify_ms) + 1), key=g.ceiling_tps)
            Ls = [L for L, _ in g.expected]
            pays = [L for L, m in g.expected if g.tokens_per_s(L, m) > g.baseline_tps]
            if pays:
                drafter = (f"a drafter at accept length {', '.join(f'{L:g}' for L in pays)} pays (a warm start, if it "
                           f"keeps that accept length on the new target; more samples, if they reach {be:.2f} at "
                           f"k = {k}); fix the verify too, it multiplies every gain")
            else:
                drafter = (f"no drafter at accept length {', '.join(f'{L:g}' for L in Ls)} pays (neither a warm start "
                           f"nor more samples, unless they pass {be:.2f} at k = {k}); the most any k gives is "
                           f"{g.ceiling_tps(top):.0f} tok/s with every draft accepted, so fix the verify first")
            out.append(f"If {g.reading}: break-even at k = {k} is {be:.2f} (the account's cycle: the "
                       f"{g.verify_ms[k - 1]:.1f} ms verify + {k} x {g.draft_ms:.2f} ms drafting); {drafter}.")
        return out

    def sentences(self) -> list[str]:
        return [self.verdict_sentence(), *self.answers(), self.settle_sentence()]

    def table_rows(self) -> list[list[str]]:
        """One row per reading: the verify at the next k, each expected accept length's tok/s and verdict, the
        break-even at that k; a last row with the verdict of both."""
        rows = []
        k = max([self.next_k] + [m for _, m in self.per_token.expected])
        base = self.per_token.baseline_tps
        for g in (self.per_token, self.per_forward):
            cells = [g.reading, f"{g.verify_ms[k - 1]:.1f}"]
            for L, m in g.expected:
                tps = g.tokens_per_s(L, m)
                cells.append(f"{tps:.0f} ({tps / base - 1:+.0%}, {_verdict(tps, base)})")
            rows.append(cells + [f"{g.break_even(k):.2f}"])
        rows.append(["both", "", *(r["verdict"] for r in self.rows()), ""])
        return rows

    def headers(self) -> list[str]:
        k = max([self.next_k] + [m for _, m in self.per_token.expected])
        return ["reading", f"verify ms at k = {k}",
                *(f"accept length {L:g} at k = {m}: tok/s" for L, m in self.per_token.expected),
                f"break-even at k = {k}"]

    def __str__(self) -> str:
        wrap = textwrap.TextWrapper(width=100, initial_indent="- ", subsequent_indent="  ", break_on_hyphens=False)
        return (text_table(self.headers(), self.table_rows(), title="The verify, read two ways") + "\n"
                + "\n".join(wrap.fill(x) for x in self.sentences()))

    def _repr_html_(self) -> str:
        return (html_table(self.headers(), self.table_rows(), caption="The verify, read two ways")
                + kv_html([(f"the fork, {g.reading}", a) for g, a in zip((self.per_token, self.per_forward),
                                                                        self.answers())]
                          + [("what settles it", self.settle_sentence())]))

    def to_json(self) -> dict[str, Any]:
        k = self.next_k
        return {"target_model": self.per_token.label, "tp": self.per_token.tp, "rows": self.rows(),
                "verify_ms_at_next_k": {"steps": k, "per_token": self.per_token.verify_ms[k - 1],
                                        "per_forward": self.per_forward.verify_ms[k - 1]},
                "settle": {"sglang": SETTLE_SGLANG.format(tp=self.per_token.tp, k=k, n=k + 1),
                           "vllm": SETTLE_VLLM.format(tp=self.per_token.tp, k=k)},
                "levers": LEVERS, "answers": self.answers(),
                "per_token": self.per_token.to_json(), "per_forward": self.per_forward.to_json()}


def growing_verify(shape: ModelShape | Mapping[str, Any], *, baseline_tps: float, verify_ms: float,
                   steps: int, tp: int = 1, context: int = 4096, split: float | str = 0.0,
                   name: str = "target") -> CostModel:
    """``shape``'s cost model at batch 1 on ``tp`` GPUs at ``context`` tokens, calibrated to a deployment's decode
    step and its verify at ``steps`` (the model ``eaglekit plan`` fits to the same two forwards); what the verify
    holds beyond bytes and FLOPs read per verified token (``split`` 0), per verify forward (1) or a share of each
    (:func:`~eaglekit.core.serving.costmodel.split_verify`). A target whose weights per GPU exceed the largest GPU
    in the table is refused: it cannot have run on ``tp`` GPUs."""
    check_parallel(tp, context)
    s = shape if isinstance(shape, ModelShape) else shape_from_config(shape, name=name)
    per_gpu = s.resident_bytes() / tp / 1e9
    if per_gpu > LARGEST_GPU_GB:
        need = math.ceil(s.resident_bytes() / 1e9 / LARGEST_GPU_GB)
        raise InputError(f"{s.name} holds {s.resident_bytes() / 1e9:.0f} GB of weights, {per_gpu:.0f} GB per GPU on TP "
                         f"{tp}: no GPU holds that (the largest in the table, {LARGEST_GPU_GB:g} GB); give the TP the "
                         f"deployment ran on (--tp; at least {need})")
    model = calibrate(CostModel(s, None, tp, context),
                      [Point(1, 1, 1000.0 / baseline_tps), Point(1, steps + 1, verify_ms)])
    # the per-token reading carries its line past the measured verify: that is the hypothesis it prices
    return replace(split_verify(model, split), carry_excess=True)


#: The seed deployment's targets: Kimi-K2.5 with INT4 experts (what it serves) and Kimi-K2 in FP8.
SEED_TARGETS = ("kimi-k25-int4", "kimi-k2-fp8")
#: The seed deployment's tensor-parallel degree (8 GPUs).
SEED_TP = 8

GrowsFor = Mapping[str, ModelShape | Mapping[str, Any]] | Sequence[str]


@dataclass(frozen=True)
class Account:
    """The throughput account of one deployment: the verify-only arithmetic beside the cycle the measurement
    implies, what each target needs at the deployment's steps, and what expected accept lengths give.

    ``draft_ms`` is per draft step: derived from the measurement ((cycle - verify) / steps, any other
    per-cycle cost included) unless given, in which case the rest is ``overhead_ms``.
    """

    baseline_tps: float
    verify_ms: float
    steps: int
    accept_length: float  # measured
    spec_tps: float  # measured
    draft_ms: float
    overhead_ms: float
    targets: tuple[Reach, ...]
    projections: tuple[Projection, ...]
    growing: tuple[GrowingVerify, ...] = ()
    fork: Fork | None = None

    @classmethod
    def from_measurements(cls, baseline_tps: float, spec_tps: float, accept_length: float, *, verify_ms: float,
                          steps: int, draft_ms: float | None = None, targets: Sequence[float] = (),
                          expected: Sequence[float | tuple[float, int]] = (),
                          verify_grows_for: GrowsFor | None = None, tp: int = 1, context: int = 4096,
                          verify_split: float | str = 0.0) -> Account:
        """The account of a deployment measured at ``spec_tps`` with accept length ``accept_length`` and
        ``steps`` draft steps, against ``baseline_tps`` without speculation and ``verify_ms`` per verify.

        ``verify_grows_for`` names target models ({label: config or shape}, or published names such as
        ``"kimi-k25-int4"``): for each, every target and expected accept length is priced again with a verify
        that grows with k (:class:`GrowingVerify`), the model calibrated to this deployment on ``tp`` GPUs at
        ``context`` tokens (the plan's cost model of the same two forwards, so both price a verify alike), with the
        verify's excess over bytes and FLOPs read ``verify_split`` (``per-token``, ``per-forward`` or the fraction
        per forward). The first such model is also priced at both ends (:attr:`fork`): one decode and one verify
        cannot tell the readings apart."""
        k = check_steps(steps)
        if k is None:
            raise InputError("the account needs the deployment's draft steps k (num_speculative_tokens): "
                             "it splits the measured cycle into verify and k draft steps")
        fit = fit_from_measurements(baseline_tps, spec_tps, accept_length, verify_ms=verify_ms, steps=k)
        rest = fit.cycle_ms - verify_ms
        if rest < -1e-9:
            raise InputError(
                f"{spec_tps:g} tok/s at accept length {accept_length:g} implies a {fit.cycle_ms:.2f} ms cycle, shorter "
                f"than the {verify_ms:g} ms verify alone: check the verify time and the measured throughput")
        if draft_ms is None:
            draft, overhead = max(rest, 0.0) / k, 0.0
        else:
            draft = float(draft_ms)
            overhead = rest - k * draft
            if overhead < -1e-9:
                raise InputError(
                    f"{k} draft steps of {draft:g} ms do not fit the measured {fit.cycle_ms:.2f} ms cycle (verify "
                    f"{verify_ms:g} ms leaves {rest:.2f} ms): lower the draft time, or leave it out to derive it")
            overhead = max(overhead, 0.0)
        ts = tuple(reach(t, verify_ms=verify_ms, steps=k, draft_ms=draft, overhead_ms=overhead) for t in targets)
        projections = []
        for item in expected:  # an accept length (priced at the fewest steps that allow it), or (L, its measured k)
            L, at = item if isinstance(item, tuple) else (item, None)
            L = check_accept_length(L, None)
            m = max(k, math.ceil(L - 1 - 1e-9)) if at is None else check_steps(at)
            if L > m + 1 + 1e-9:
                raise InputError(f"accept length {L:g} cannot be reached at k = {m}: k steps emit at most {m + 1} tokens "
                                 "per cycle")
            cycle = verify_ms + overhead + m * draft
            tps = throughput(L, cycle_ms=cycle)
            projections.append(Projection(L, m, cycle, tps, tps / baseline_tps, at is not None))
        split = parse_split(verify_split)
        growing = []
        fork = None
        grows = verify_grows_for or {}
        named = grows.items() if isinstance(grows, Mapping) else (published(n) for n in grows)
        # the verify table reaches past the measured k and every projection's k (the slope needs one beyond k)
        top = max(GROWTH_STEPS, k + 1, *(p.steps for p in projections))
        for label, shape in named:
            def priced(f: float) -> GrowingVerify:
                model = growing_verify(shape, baseline_tps=baseline_tps, verify_ms=verify_ms, steps=k, tp=tp,
                                       context=context, split=f, name=label)
                # one verify model for every page: the cost model calibrated through the measured decode and verify,
                # the curve the plan prices (its k + 1 tokens); the calculator's verify growth is the line through
                # the measured k and k + 1, so it meets the curve there and drifts from it by under 1% out to the top
                verify = tuple(float(verify_ms) if j == k else model.ms(1, j + 1) for j in range(1, top + 1))
                return GrowingVerify(label, verify, draft, overhead, k, float(baseline_tps),
                                     tuple((r.target_tps, r.min_steps) for r in ts),
                                     tuple((p.accept_length, p.steps) for p in projections), f, tp,
                                     model.per_verify_ms)
            growing.append(priced(split))
            if fork is None:
                fork = Fork(priced(0.0), priced(1.0))
        return cls(float(baseline_tps), float(verify_ms), k, fit.accept_length, fit.spec_tps, draft, overhead, ts,
                   tuple(projections), tuple(growing), fork)

    @classmethod
    def seed(cls) -> Account:
        """The seed's deployment: 82 tok/s baseline; 60 tok/s (59-61 measured) at accept length 2.0 with 2 draft
        steps; 30 ms verify; targets 150 and 200 tok/s; the public K2 drafter's 3.2-3.5 priced."""
        return cls.from_measurements(82.0, 60.0, 2.0, verify_ms=30.0, steps=2, targets=(150.0, 200.0),
                                     expected=(3.2, 3.5), verify_grows_for=SEED_TARGETS, tp=SEED_TP)

    # -- derived -----------------------------------------------------------------------------------

    @property
    def cycle_ms(self) -> float:
        """The measured cycle: accept length / speculative throughput."""
        return self.verify_ms + self.overhead_ms + self.steps * self.draft_ms

    @property
    def scenario(self) -> Scenario:
        """The measured deployment as a :class:`Scenario` (for :func:`~eaglekit.core.speedup.specmath.estimate`)."""
        return Scenario(self.baseline_tps, self.verify_ms, draft_ms=self.draft_ms, steps=self.steps,
                        overhead_ms=self.overhead_ms)

    @property
    def growing_scenario(self) -> Scenario:
        """The measured deployment with its verify growing per drafted token as the first model of
        ``verify_grows_for`` prices it (its mean slope, :attr:`GrowingVerify.slope_ms`, to 0.01 ms as the
        calculator takes it), anchored at the measured k; the measured deployment itself without such a model."""
        if not self.growing:
            return self.scenario
        return replace(self.scenario, verify_growth_ms=round(self.growing[0].slope_ms, 2))  # already to 0.01 ms

    def scenario_for(self, reading: str) -> Scenario:
        """:attr:`growing_scenario` under one end of the verify split (``per-token`` or ``per-forward``,
        :attr:`fork`): its verify growth is that reading's growth from the measured k to k + 1."""
        if self.fork is None:
            return self.scenario
        g = {"per-token": self.fork.per_token, "per-forward": self.fork.per_forward}.get(reading)
        if g is None:
            raise InputError(f"reading {reading!r}: give per-token or per-forward")
        return replace(self.scenario, verify_growth_ms=round(g.slope_ms, 2))

    @property
    def break_even(self) -> float:
        """Break-even accept length on the measured cycle."""
        return break_even_accept_length(baseline_tps=self.baseline_tps, cycle_ms=self.cycle_ms)

    @property
    def verify_only_break_even(self) -> float:
        """Break-even accept length on the verify time alone (the seed's 2.46)."""
        return break_even_accept_length(baseline_tps=self.baseline_tps, cycle_ms=self.verify_ms)

    @property
    def ceiling_tps(self) -> float:
        """The most the deployment's k steps can give on the measured cycle: k + 1 tokens per cycle."""
        return (self.steps + 1) * 1000.0 / self.cycle_ms

    def verify_only_needs(self, target_tps: float) -> tuple[float, float]:
        """(accept length, alpha) a target needs in the verify-only model (unbounded chain, drafting free)."""
        need = needed_accept_length(target_tps, cycle_ms=self.verify_ms)
        return need, (0.0 if need <= 1 else alpha_for_accept_length(need))

    def _overhead_words(self) -> str:
        return f" + {self.overhead_ms:.2f} ms overhead" if self.overhead_ms > 0 else ""

    # -- words -------------------------------------------------------------------------------------

    def measured_sentence(self) -> str:
        change = self.spec_tps / self.baseline_tps - 1
        what = "drafting and any other per-cycle cost" if self.overhead_ms == 0 else "drafting"
        extra = self.cycle_ms - self.verify_ms
        return (f"Measured: {self.spec_tps:g} tok/s at accept length {self.accept_length:g} with k = {self.steps} draft "
                f"steps against {self.baseline_tps:g} tok/s without speculation ({change:+.0%}). That is "
                f"{self.cycle_ms:.1f} ms per draft-verify cycle: the {self.verify_ms:g} ms verify plus {extra:.1f} ms "
                f"of {what} ({self.steps} steps of {self.draft_ms:.2f} ms{self._overhead_words()}), so speculation "
                f"pays only above accept length {self.break_even:.2f}.")

    def verify_only_sentence(self) -> str:
        parts = []
        for r in self.targets:
            need, alpha = self.verify_only_needs(r.target_tps)
            parts.append(f"{r.target_tps:g} tok/s needs {need:.1f} ({alpha:.0%} per-token acceptance)")
        needs = ("; " + ", ".join(parts)) if parts else ""
        return (f"The verify-only arithmetic ({self.verify_ms:g} ms per cycle, drafting counted free, no limit on "
                f"steps) gives break-even {self.verify_only_break_even:.2f}{needs}. It leaves out the "
                f"{self.cycle_ms - self.verify_ms:.1f} ms of drafting per cycle and the ceiling of "
                f"{self.steps + 1} tokens per cycle that {self.steps} steps impose (at most {self.ceiling_tps:.0f} "
                "tok/s here), so it understates break-even and makes high targets look reachable.")

    def verdict_lines(self) -> list[str]:
        """One line per expected accept length, the verdict first: both readings of the verify where the account prices
        a growing verify (TOO CLOSE TO CALL where they disagree, and the run that settles it), else the verify held at
        the measured time; each at its k, saying why that k."""
        out = []
        rows = {(r["accept_length"], r["steps"]): r for r in (self.fork.rows() if self.fork is not None else ())}
        for p in self.projections:
            why = (f"k = {p.steps}" + ("" if p.given_steps else f", the fewest steps that allow it (give the k it was "
                                                                 "measured at: --candidate-steps)"))
            r = rows.get((p.accept_length, p.steps))
            if r is None:
                call = _verdict(p.tokens_per_s, self.baseline_tps)
                out.append(f"Verdict: accept length {p.accept_length:g} at {why}: {call} on the point figure, "
                           f"{p.tokens_per_s:.0f} tok/s with the verify held at {self.verify_ms:g} ms (a MoE verify grows "
                           "with k: --verify-grows-for prices it).")
                continue
            base = self.baseline_tps
            settle = (f"; the verify at k = {self.fork.next_k} settles it" if r["verdict"] == "TOO CLOSE TO CALL"
                      and r["per_token_verdict"] != r["per_forward_verdict"] else "")
            out.append(f"Verdict: accept length {p.accept_length:g} at {why}: {r['verdict']} "
                       f"({r['per_token_tokens_per_s']:.0f} tok/s if the verify's excess is paid per verified token, "
                       f"{r['per_token_tokens_per_s'] / base - 1:+.0%}, {r['per_token_verdict']}; "
                       f"{r['per_forward_tokens_per_s']:.0f} tok/s if per verify forward, "
                       f"{r['per_forward_tokens_per_s'] / base - 1:+.0%}, {r['per_forward_verdict']}){settle}; point "
                       f"figures on the measured cycle, its draft steps costing what the measured drafter's did, TOO "
                       f"CLOSE TO CALL within {POINT_BAND:.0%} of the baseline (the two throughputs' noise from run to run)"
                       + (f"; per-token carries the verify's line past the k = {self.steps} measured, where eaglekit "
                          "plan caps it at a decode of k + 1 requests plus the excess measured" if p.steps > self.steps
                          else "")
                       + "; eaglekit plan gives the cycle's interval, with a prior on another drafter's steps.")
        return out

    def sentences(self) -> list[str]:
        """The account in sentences: measured cycle, the verify-only figures and why they differ, targets,
        projections."""
        return [self.measured_sentence(), self.verify_only_sentence(), *(r.sentence() for r in self.targets),
                *(p.sentence(self) for p in self.projections), *(g.sentence() for g in self.growing),
                *(self.fork.sentences() if self.fork is not None else ())]

    def rows(self) -> list[tuple[str, str]]:
        k, d = self.steps, self.draft_ms
        rows = [
            ("measured", f"{self.spec_tps:g} tok/s at accept length {self.accept_length:g}, k = {k} draft steps "
                         f"(baseline {self.baseline_tps:g} tok/s, {self.spec_tps / self.baseline_tps - 1:+.0%})"),
            ("measured cycle", f"{self.cycle_ms:.2f} ms = verify {self.verify_ms:g} + {k} x draft {d:.2f}"
                               f"{self._overhead_words()} (accept length / tok/s)"),
            ("break-even", f"accept length {self.break_even:.2f} on the measured cycle; "
                           f"{self.verify_only_break_even:.2f} on verify alone"),
            ("ceiling", f"k = {k}: at most {k + 1} tokens per cycle, {self.ceiling_tps:.0f} tok/s"),
            ("why two figures", f"verify-only arithmetic counts drafting free and steps unlimited; the measured "
                                f"cycle adds {self.cycle_ms - self.verify_ms:.2f} ms of drafting and k = {k}"),
        ]
        for r in self.targets:
            need, alpha = self.verify_only_needs(r.target_tps)
            rows.append((f"{r.target_tps:g} tok/s", f"{r.sentence()} (Verify-only arithmetic: {need:.2f}, "
                                                     f"{alpha:.0%} per-token acceptance.)"))
        rows += [(f"accept length {p.accept_length:g}", p.sentence(self)) for p in self.projections]
        rows += [(f"verify grows with k ({g.label})", g.sentence()) for g in self.growing]
        if self.fork is not None:
            f = self.fork
            rows += [("both readings of the verify", f.verdict_sentence()),
                     *((f"the fork, {g.reading}", a) for g, a in zip((f.per_token, f.per_forward), f.answers())),
                     ("what settles it", f.settle_sentence())]
        return rows

    def to_json(self) -> dict:
        """The ``eaglekit speedup --spec-tps --json`` object."""
        return {
            "baseline_tps": self.baseline_tps, "spec_tps": self.spec_tps, "accept_length": self.accept_length,
            "steps": self.steps, "verify_ms": self.verify_ms, "draft_ms": self.draft_ms, "overhead_ms": self.overhead_ms,
            "speedup": self.spec_tps / self.baseline_tps,
            "cycle_ms": self.cycle_ms, "drafting_ms_per_cycle": self.cycle_ms - self.verify_ms,
            "break_even_accept_length": self.break_even,
            "verify_only_break_even_accept_length": self.verify_only_break_even, "ceiling_tps": self.ceiling_tps,
            "targets": [{**r.to_json(), **dict(zip(("verify_only_accept_length", "verify_only_alpha"),
                                                   self.verify_only_needs(r.target_tps)))}
                        for r in self.targets],
            "projections": [{"accept_length": p.accept_length, "steps": p.steps, "cycle_ms": p.cycle_ms,
                             "tokens_per_s": p.tokens_per_s, "speedup": p.speedup} for p in self.projections],
            "growing_verify": [g.to_json() for g in self.growing],
            "verify_readings": None if self.fork is None else self.fork.to_json(),
        }

    def __str__(self) -> str:
        wrap = textwrap.TextWrapper(width=100, initial_indent="- ", subsequent_indent="  ", break_on_hyphens=False)
        first = "".join(textwrap.fill(v, width=100, subsequent_indent="  ") + "\n" for v in self.verdict_lines())
        return first + "Throughput account\n" + "\n".join(wrap.fill(s) for s in self.sentences())

    def _repr_html_(self) -> str:
        return kv_html(self.rows(), caption="Throughput account")
