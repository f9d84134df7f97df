"""Which engine releases load each block drafter family, under which architecture names, with which flags.

Beside :mod:`eaglekit.core.configs.engine_readings` (the EAGLE-3 aux-id rules per release). For block drafters
the layer ids need no per-release table: every engine reads ``target_layer_ids`` as layer *outputs* and adds
one to get its capture point (SGLang ``set_dflash_layers_to_capture``: ``[val + 1 for val in layer_ids]``;
vLLM ``get_eagle3_aux_layers_from_config``: "Add 1 to convert DFlash's aux layer id semantics"), the same
``hidden_states[id + 1]`` the authors' ``extract_context_feature`` reads.

What the sources say about releases, and how sure it is (``verified`` False: not checked against a release's
changelog; never a guessed number):

* DFlash, SGLang: ``--speculative-algorithm DFLASH`` since PR #22077 (merged about 2026-04-07); the first
  tagged release carrying it was not found. ``--speculative-num-draft-tokens`` is the whole block, anchor
  included (``dflash_worker.py``: ``self.block_size = int(server_args.speculative_num_draft_tokens)``).
* DFlash, vLLM: ``--speculative-config '{"method": "dflash", ...}'`` (PRs #32206, #34014, #36764); the
  DFlash authors' README asked for a nightly build in April 2026, vllm-ascend notes claim upstream support at
  v0.19.0: not verified. ``num_speculative_tokens`` counts drafts (the engine runs anchor + N masks).
* DFlash2: vLLM PR #52816 (``method: dflash`` routes ``DFlash2DraftModel``), placed in v0.28.0 by a
  third-party issue quoting the release notes; SGLang PR #35371 (merged 2026-08-19), placed in v0.5.19 by
  third-party notes, and no tagged release up to 0.5.18 ships it.
* DSpark: vLLM ``method: "dspark"`` (PR #46995, merged 2026-06-29; an issue reports it working on v0.25.0);
  SGLang loads ``Qwen3DSparkModel`` (SpecForge's export rewrites ``DSparkDraftModel`` to it); the SGLang pull
  request, release and flag were not established.

Pure: tables and string building.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from eaglekit.core.configs.block import BlockDrafterConfig, BlockFamily


@dataclass(frozen=True)
class BlockEngineSupport:
    """One engine's support for one block family. ``since``: the first release that loads it, when the sources
    give one (``verified`` says whether it was checked against that release's notes); ``absent_through``: the
    last release known NOT to load it; ``architectures``: the names the engine maps to its model (empty: the
    method alone selects it)."""

    engine: str
    family: BlockFamily
    evidence: str
    architectures: tuple[str, ...] = ()
    since: str | None = None
    verified: bool = False
    absent_through: str | None = None
    method: str | None = None  # vLLM's speculative method; for SGLang, the --speculative-algorithm

    @property
    def releases(self) -> str:
        """The releases in words, unverified ones marked so."""
        if self.since is None:
            return "first release not established"
        return f"{self.since} or newer" + ("" if self.verified else " (reported, not verified against its release notes)")

    def launch(self, cfg: BlockDrafterConfig, model: str = "DRAFTER") -> str | None:
        """The serving flags for ``cfg`` (None when the sources read do not establish them)."""
        if self.method is None:
            return None
        if self.engine == "sglang":  # --speculative-num-draft-tokens is the whole block, anchor included
            return (f"--speculative-algorithm {self.method} --speculative-draft-model-path {model} "
                    f"--speculative-num-draft-tokens {cfg.block_size}")
        spec = json.dumps({"method": self.method, "model": model, "num_speculative_tokens": cfg.drafts_per_block})
        return f"--speculative-config '{spec}'"

    def to_json(self) -> dict:
        return {"engine": self.engine, "family": self.family, "since": self.since, "verified": self.verified,
                "absent_through": self.absent_through, "architectures": list(self.architectures),
                "evidence": self.evidence}


BLOCK_ENGINES: tuple[BlockEngineSupport, ...] = (
    BlockEngineSupport("sglang", "dflash", "SGLang PR #22077 added the DFLASH algorithm (merged about 2026-04-07); "
                       "the first tagged release carrying it was not found", ("DFlashDraftModel",),
                       method="DFLASH"),
    BlockEngineSupport("vllm", "dflash", "vLLM's speculative method 'dflash' (PRs #32206, #34014, #36764); vllm-ascend "
                       "notes claim upstream support at v0.19.0, not verified", ("DFlashDraftModel",),
                       method="dflash"),
    BlockEngineSupport("sglang", "dflash2", "SGLang PR #35371 (merged 2026-08-19); third-party notes place it in "
                       "v0.5.19 and no tagged release up to 0.5.18 ships it; its launch flag was not established",
                       ("DFlash2DraftModel",), since="0.5.19", absent_through="0.5.18"),
    BlockEngineSupport("vllm", "dflash2", "vLLM PR #52816 (method 'dflash' routes DFlash2DraftModel to "
                       "DFlash2Qwen3ForCausalLM); a third-party issue quoting the release notes places it in v0.28.0",
                       ("DFlash2DraftModel",), since="0.28.0", method="dflash"),
    BlockEngineSupport("sglang", "dspark", "SGLang loads Qwen3DSparkModel (SpecForge's export rewrites DSparkDraftModel "
                       "to it); its pull request, first release and launch flag were not established",
                       ("Qwen3DSparkModel",)),
    BlockEngineSupport("vllm", "dspark", "vLLM's speculative method 'dspark' (PR #46995, merged 2026-06-29); an issue "
                       "reports it working on v0.25.0, the first release carrying it was not established",
                       method="dspark"),
)


_ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}
_FAMILY_NAMES = {"dflash": "DFlash", "dflash2": "DFlash2", "dspark": "DSpark"}


def block_engine(engine: str, family: BlockFamily) -> BlockEngineSupport:
    for s in BLOCK_ENGINES:
        if s.engine == engine and s.family == family:
            return s
    raise KeyError(f"no block-drafter support record for {engine} / {family}")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def release_verdict(support: BlockEngineSupport, version: str | None) -> tuple[str, str] | None:
    """For a named release: ("absent" | "older" | "ok", why), or None when nothing is known either way. "absent":
    the sources say that release does not load the family; "older": it predates the (unverified) first release."""
    if version is None:
        return None
    v = _version(version)
    engine, family = _ENGINE_NAMES[support.engine], _FAMILY_NAMES[support.family]
    if support.absent_through is not None and v <= _version(support.absent_through):
        return "absent", (f"{engine} {version} does not load {family} drafters (none up to "
                          f"{support.absent_through} does; {support.evidence})")
    if support.since is not None and v < _version(support.since):
        return "older", f"{engine} {version} predates {support.since}, the first release reported to load it"
    if support.since is not None:
        return "ok", f"{engine} {version} is at or after {support.releases}"
    return None


__all__ = ["BLOCK_ENGINES", "BlockEngineSupport", "block_engine", "release_verdict"]
