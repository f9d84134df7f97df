"""Which target tensors each engine release feeds an EAGLE-3 drafter: the aux id rules, version by version.

An engine turns the ids in a drafter's config into the hidden states it captures with a small rule in
its model code. The rules, read in the engines' sources (docs/aux-layers.md has the table):

* ``"plus-one"``: SGLang's ``set_eagle3_layers_to_capture`` before PR #25454, and still for most target
  models: ``layers_to_capture = [val + 1 for val in layer_ids]`` ("we plus 1 here because in sglang, for
  the ith layer, it takes the output of the (i-1)th layer as aux hidden state";
  python/sglang/srt/models/llama.py, deepseek_v2.py, qwen3.py). The model appends the residual stream
  before running layer i + 1, so id i is the *output* of layer i.
* ``"first-id"``: SGLang PR #25454 (merged 2026-05-16, "drop +1 offset on aux layer ids when first id
  != 1"): ``if layer_ids and layer_ids[0] == 1: [val + 1 ...] else: list(layer_ids)``. Ids starting at
  1 are outputs; any other list is read as "capture before layer i", the *input* of layer i. The
  change sits in the DeepSeek-V2/V3 model code (DeepseekV2ForCausalLM, which Kimi-K2 and K2.5 targets
  run on; GLM-4.7-Flash copied it, with the PR author's note "check if other draft models need similar
  layer id adjustment"). Llama, Qwen and GPT-OSS models kept the +1 (SGLang PR #32334 still found
  GPT-OSS ids [24, 30, 36] shifted to [25, 31, 37] two months later).
* ``"boundary"``: SGLang PR #32334 (merged July 2026) for GPT-OSS targets: ids are hidden-state
  boundary indices (id i = the state after i blocks = the output of layer i - 1) and the final boundary
  L is captured before the final norm (so id L, the last layer's output, is reachable).
* ``"inputs"``: vLLM (gpu_model_runner._get_eagle3_aux_layers_from_config hands the ids unchanged to
  ``set_aux_hidden_state_layers``; the model appends the state entering layer i). Every vLLM release
  eaglekit knows of reads this way.

Without ids every engine captures inputs ``[2, L//2, L-3]`` (the outputs of ``[1, L//2-1, L-4]``); vLLM
PR #50170 measured what that fallback costs a drafter trained on other layers (accept length 1.04
instead of 2.77).

Release numbers: SGLang v0.5.10 was out by April 2026, before #25454; the first release carrying
#25454, and the first carrying #32334, could not be pinned from the sources eaglekit was built against,
so they are ``None`` ("unknown") here rather than a guess. A version newer than the last known
pre-#25454 release is therefore not pinned to a reading: the view shows every reading it may mean.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from eaglekit.core.errors import InputError

Rule = Literal["plus-one", "first-id", "boundary", "inputs"]
#: Target model code families whose SGLang reading differs (keyed by the target's architectures[0]).
Family = Literal["deepseek", "gpt-oss", "other"]
FAMILY_OF_ARCHITECTURE: Mapping[str, Family] = {
    "DeepseekV2ForCausalLM": "deepseek", "DeepseekV3ForCausalLM": "deepseek",
    "KimiK25ForConditionalGeneration": "deepseek", "Glm4MoeLiteForCausalLM": "deepseek",
    "GptOssForCausalLM": "gpt-oss",
}
FAMILY_NAMES = {"deepseek": "DeepSeek-V2/V3 model code (Kimi-K2, K2.5)", "gpt-oss": "GPT-OSS model code",
                "other": "other model code (Llama, Qwen, ...)"}


@dataclass(frozen=True)
class Release:
    """A span of one engine's releases that reads aux ids one way (per target family).

    ``first``/``last``: the first and last release numbers of the span where known (None: unknown or
    open-ended); ``change``: the pull request that began the span."""

    engine: str
    key: str
    name: str
    first: str | None
    last: str | None
    change: str
    rules: Mapping[Family, Rule]
    pr: str = ""  # "#25454": the change that began the span

    def rule(self, family: Family) -> Rule:
        return self.rules[family]

    @property
    def span(self) -> str:
        """The releases in words: "up to 0.5.10", "first release unknown (after 0.5.10)", ..."""
        if self.first is None and self.last is not None:
            return f"up to {self.last}"
        if self.first is None:
            return "first release unknown" + (f" ({self.change})" if self.change else "")
        return f"{self.first} onward" if self.last is None else f"{self.first} to {self.last}"

    def to_json(self) -> dict:
        return {"engine": self.engine, "key": self.key, "name": self.name, "first": self.first, "last": self.last,
                "change": self.change, "rules": dict(self.rules)}


_PLUS_ONE: Mapping[Family, Rule] = {"deepseek": "plus-one", "gpt-oss": "plus-one", "other": "plus-one"}
#: SGLang's readings, oldest first. The last one is what SGLang's main branch does now.
SGLANG_RELEASES: tuple[Release, ...] = (
    Release("sglang", "sglang<25454", "SGLang up to 0.5.10", None, "0.5.10", "", _PLUS_ONE),
    Release("sglang", "sglang>=25454", "SGLang since #25454", None, None, "PR #25454, merged 2026-05-16",
            {"deepseek": "first-id", "gpt-oss": "plus-one", "other": "plus-one"}, "#25454"),
    Release("sglang", "sglang>=32334", "SGLang since #32334", None, None, "PR #32334, merged July 2026",
            {"deepseek": "first-id", "gpt-oss": "boundary", "other": "plus-one"}, "#32334"),
)
VLLM_RELEASES: tuple[Release, ...] = (
    Release("vllm", "vllm", "vLLM", None, None, "", {"deepseek": "inputs", "gpt-oss": "inputs", "other": "inputs"}),
)
RELEASES: Mapping[str, tuple[Release, ...]] = {"sglang": SGLANG_RELEASES, "vllm": VLLM_RELEASES}
#: The newest release number known to predate each engine's last change (None: every release reads alike).
LAST_KNOWN_OLD: Mapping[str, str | None] = {"sglang": "0.5.10", "vllm": None}
_SPEC = re.compile(r"^\s*([A-Za-z_-]+)\s*(?:==\s*v?([0-9][0-9A-Za-z.+-]*))?\s*$")


@dataclass(frozen=True)
class EngineChoice:
    """An engine as the user named it (``"sglang"``, ``"sglang==0.5.9"``, ``"vllm"``) and the releases
    that name may mean, newest first. ``pinned``: the version resolved to one reading."""

    engine: str
    version: str | None
    releases: tuple[Release, ...]
    pinned: bool

    @property
    def label(self) -> str:
        name = RELEASES[self.engine][0].name.split()[0]
        return f"{name} {self.version}" if self.version else name

    def to_json(self) -> dict:
        return {"engine": self.engine, "version": self.version, "pinned": self.pinned,
                "releases": [r.key for r in self.releases]}


def parse_engine(spec: str) -> EngineChoice:
    """``"sglang"`` (every known SGLang reading, newest first), ``"sglang==0.5.9"`` (that release), ``"vllm"``.

    A version at or below the last release known to predate an engine's change is pinned to the oldest
    reading; a newer one is not pinned (its first release carrying the change is unknown), so every
    reading stays in the choice."""
    if not isinstance(spec, str):
        raise InputError(f"Engine must be a string such as 'sglang', 'sglang==0.5.9' or 'vllm', got {spec!r}.")
    m = _SPEC.match(spec)
    engine = m.group(1).lower() if m else None
    if engine not in RELEASES:
        raise InputError(f"Unknown engine {spec!r}: expected sglang or vllm, optionally with a release "
                         "(sglang==0.5.9).")
    version = m.group(2)
    releases = tuple(reversed(RELEASES[engine]))
    if version is None:
        return EngineChoice(engine, None, releases, len(releases) == 1)
    number = _version_tuple(version, spec)
    last_old = LAST_KNOWN_OLD[engine]
    if last_old is None:
        return EngineChoice(engine, version, releases, True)
    old = _version_tuple(last_old, last_old)
    suffix = version[len(".".join(map(str, number))):].lstrip(".").lower()
    # 0.5.10.post1 may have been cut after the change; 0.5.10rc1 came before 0.5.10.
    if number < old or (number == old and (not suffix or suffix.startswith("rc"))):
        return EngineChoice(engine, version, (RELEASES[engine][0],), True)
    return EngineChoice(engine, version, releases, False)


def target_family(architecture: str | None) -> Family:
    """The model code family that decides SGLang's reading (``"other"`` when unknown)."""
    return FAMILY_OF_ARCHITECTURE.get(architecture or "", "other")


def outputs_selected(rule: Rule, ids: Sequence[int]) -> tuple[int, ...]:
    """The decoder layer whose output each id selects under ``rule`` (-1: the embedding output)."""
    ids = tuple(ids)
    if rule == "plus-one" or (rule == "first-id" and ids and ids[0] == 1):
        return ids
    return tuple(i - 1 for i in ids)


def capture_range(rule: Rule, ids: Sequence[int], num_layers: int) -> tuple[int, int]:
    """The ids (inclusive) an engine following ``rule`` can capture in a ``num_layers``-layer target.

    plus-one captures id i at the input of layer i + 1, so its last id is L-2; inputs captures 0..L-1;
    boundary adds the final boundary L (captured before the final norm, #32334). first-id is plus-one
    for lists starting at 1 and inputs otherwise."""
    ids = tuple(ids)
    if rule == "plus-one" or (rule == "first-id" and ids and ids[0] == 1):
        return 0, num_layers - 2
    return 0, num_layers if rule == "boundary" else num_layers - 1


def capturable(rule: Rule, ids: Sequence[int], num_layers: int) -> bool:
    """Whether an engine following ``rule`` captures every id of a ``num_layers``-layer target."""
    lo, hi = capture_range(rule, ids, num_layers)
    return all(lo <= i <= hi for i in ids)


def ids_selecting(rule: Rule, outputs_of: Sequence[int], num_layers: int | None) -> tuple[int, ...] | None:
    """The ids that make an engine following ``rule`` select the outputs of ``outputs_of``, or None
    when no id list does (for first-id: outputs starting at layer 0 need ids starting at 1, which that
    rule reads as outputs)."""
    outs = tuple(outputs_of)
    if not outs:
        return None
    if rule == "plus-one":
        ids = outs
    elif rule == "first-id":
        ids = outs if outs[0] == 1 else tuple(o + 1 for o in outs)
        if outputs_selected(rule, ids) != outs:
            return None
    else:
        ids = tuple(o + 1 for o in outs)
    if num_layers is not None and not capturable(rule, ids, num_layers):
        return None
    return ids



def _version_tuple(version: str, shown: str) -> tuple[int, ...]:
    m = re.match(r"^v?(\d+(?:\.\d+)*)", version)
    if not m:
        raise InputError(f"Cannot read the release number in {shown!r}: write it as sglang==0.5.9.")
    return tuple(int(p) for p in m.group(1).split("."))


__all__ = ["EngineChoice", "Release", "RELEASES", "LAST_KNOWN_OLD", "SGLANG_RELEASES", "VLLM_RELEASES", "parse_engine",
           "target_family", "outputs_selected", "capture_range", "capturable", "ids_selecting"]
