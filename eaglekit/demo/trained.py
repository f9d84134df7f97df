"""A trained demo world where accept lengths mean something (random weights accept nothing).

This is the demo's one world: every page that shows a drafter against a target uses these models.

A synthetic token language: 96 tokens, of which 48 "common" ones carry the grammar. Each next token is
``perm[x_{n-1} % 2][x_n]`` (a second-order rule: the drafter must read the earlier token from the target's
hidden states, its embedding input only shows the last one), with 10% noise drawn from all 96 tokens.
The "K2.5" language redraws 40% of one of the two permutations and swaps :data:`NEW_COMMON` of the common
tokens for others, so K2.5's draft vocabulary differs from K2's (a warm start needs a remap).

* ``targets/k2``: a tiny Kimi-K2-shaped model (DeepseekV3 architecture: MLA attention, layer 0 dense,
  layers 1-3 with 4 routed experts, top 2, and a shared expert; 4 layers, hidden 64) trained on the language;
* ``targets/k25``: k2 continued on the shifted language (a new version of the same target);
* ``target-weights/k2-fp8``, ``target-weights/k25-int4``: the same trained weights in the layouts the
  real targets ship: K2 in FP8 with 128x128 block scales (two shards), K2.5 under ``language_model.`` in
  compressed-tensors INT4 (group 32) with a vision tower (three shards) (:mod:`eaglekit.demo.targets`);
* ``hidden-states/k2``, ``hidden-states/k25``: each target's hidden states on the same K2.5 prompts
  (``eaglekit dump-hidden``): outputs of the drafter's aux layers and the last layer;
* ``drafters/k2``: an EAGLE-3 drafter (SpecForge layout, aux ids [0, 1, 2] = outputs of layers 0-2)
  trained with training-time test on k2's hidden states (draft vocabulary = k2's 48 common tokens);
* ``drafters/k2-speculators``: the same weights in the speculators layout (ids [1, 2, 3], inputs);
* ``drafters/k25-scratch``: trained from scratch on k25 with few samples (the team's drafter; draft
  vocabulary = k25's common tokens);
* ``drafters/k25-warm``: ``eaglekit export`` of k2's drafter onto k25-scratch's vocabulary map (rows of the
  new tokens from k25's lm_head), fine-tuned on the same few samples;
* ``checkpoints/k25-scratch/epoch_0_step_N``, ``checkpoints/k25-warm/epoch_0_step_N``: two single-epoch
  runs on fresh K2.5 samples (:data:`CURVE_BATCH` a step, none seen twice), from scratch and from the
  warm start, with a checkpoint at each step of :data:`CURVE_CHECKPOINTS`, saved as SpecForge saves them
  (the drafter and a ``training_state.pt`` with ``epoch`` and ``global_step``): the accept-length curve;
* ``drafters/k25-mla``: the public-drafter stand-in: an MLA EAGLE-3 drafter (Kimi's kind: DeepSeek MLA
  attention, a full-vocabulary head, no d2t/t2d) trained on k25 with plenty of samples, saved as
  TorchSpec's vLLM export is (``layers.0.*``, model_type ``kimi_k2``, aux ids shifted to vLLM's count:
  [1, 2, 3] = inputs of layers 1-3 = outputs of layers 0-2);
* ``drafters/k25-dflash``: a DFlash block drafter (z-lab's ``DFlashDraftModel``: block 5, so K = 1..4 drafts in
  one forward; one Qwen3-style layer; no embedding and no lm_head, it drafts through the target's) trained with the
  authors' objective on the SAME few K2.5 samples and target features as k25-scratch and k25-warm
  (:mod:`eaglekit.demo.dflash`): the K2.5 team's fourth candidate;
* ``drafters/random``: untrained;
* ``broken/<fault>``: copies of ``drafters/k2`` with one planted fault each (:mod:`eaglekit.demo.broken`);
* ``prompts-k2.jsonl``, ``prompts-k25.jsonl``: held-out prompts in each language (token ids), and
  ``prompts-chat.jsonl`` (messages, for the target's word-level tokenizer and chat template).

Models are saved with ``save_pretrained`` / the drafter layouts, so every path runs on them for real.
Deterministic (fixed seeds, one thread while training), one to two minutes on 2 cores, cached: a second
call with the same :data:`TRAINED_VERSION` reuses the folder.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from eaglekit.analysis.draft import DraftModel
from eaglekit.analysis.acceptance.target import dump_hidden_states, load_target_model, quiet_loading
from eaglekit.analysis.compat.export import export
from eaglekit.core.render import html_table
from eaglekit.demo.broken import build_broken
from eaglekit.demo.build import built_once
from eaglekit.demo.dflash import BLOCK, DRAFT_LAYERS, dflash_config, mask_token_id, save_dflash, train_dflash
from eaglekit.demo.targets import write_target_forms

TRAINED_VERSION = 8  # bump whenever training or the saved layout changes: caches are keyed on it
LABEL = "SYNTHETIC trained demo (tiny Kimi-K2-shaped MoE target on a token language, EAGLE-3 drafters); not a real model"
VOCAB, COMMON, HIDDEN, LAYERS, HEADS, INTER = 96, 48, 64, 4, 4, 192
EXPERTS, TOP_K, MOE_INTER, Q_LORA, KV_LORA = 4, 2, 32, 32, 32
NEW_COMMON = 8                          # common tokens K2.5's language swaps for others
AUX_IDS = [0, 1, 2]                     # SpecForge ids: outputs of layers 0, 1, 2 = hidden_states 1, 2, 3
SEQ, NOISE, SHIFT = 48, 0.10, 0.40
FEW_SAMPLES = 6
FEW_STEPS = 200                         # fine-tuning steps of both K2.5 drafters on the few samples
#: Training steps at which the K2.5 curve runs save a checkpoint (``epoch_0_step_N``, as SpecForge names them);
#: each step reads CURVE_BATCH fresh samples (one epoch, no sample seen twice), so a checkpoint has seen
#: ``N x CURVE_BATCH`` samples. A lower learning rate than the other drafters' keeps the curve in the
#: data-limited regime over these sizes (at 3e-3 both runs saturate by 64 samples). The runs read the first
#: samples of a pool of CURVE_POOL drawn once, so the series stays the same when the checkpoints change.
CURVE_CHECKPOINTS = (16, 32, 64, 128, 256)
CURVE_BATCH = 1
CURVE_LR = 1e-3
CURVE_POOL = 512
#: Chain steps the drafters are trained for (training-time test): beyond them per-step acceptance collapses.
#: The manifest records it (``drafter_chain_steps``).
CHAIN_STEPS = 3
#: The positions the demo's targets and drafters claim (``max_position_embeddings``), far past the SEQ tokens they
#: were trained on, as real drafters claim their target's range after short training samples: the long traces
#: (:func:`eaglekit.demo.prompts.long_prompts`) read them there. The rotary embedding is computed for any
#: position, so the value changes no weight and no output.
CONTEXT = 8192


@dataclass(frozen=True)
class TrainedWorld:
    """Where the trained demo lives; paths by name."""

    root: Path
    manifest: dict[str, Any]

    def target(self, name: str) -> Path:
        return self.root / "targets" / name

    def drafter(self, name: str) -> Path:
        return self.root / "drafters" / name

    def prompts(self, name: str) -> Path:
        return self.root / f"prompts-{name}.jsonl"

    def broken(self, name: str) -> Path:
        """A copy of the K2 drafter with one planted fault (:mod:`eaglekit.demo.broken`), for ``eaglekit check``
        against ``target("k2")``."""
        return self.root / "broken" / name

    def target_weights(self, name: str) -> Path:
        """A target's weights in its shipping layout: ``"k2"`` (FP8 blocks) or ``"k25"`` (INT4, under
        ``language_model.``); the same trained weights as :meth:`target`."""
        return self.root / self.manifest["target_weights"][name]

    def hidden_dump(self, name: str) -> Path:
        """A target's hidden-state dump (``eaglekit dump-hidden``), ``"k2"`` or ``"k25"``, same prompts."""
        return self.root / self.manifest["hidden_states"][name]

    def checkpoints(self, name: str) -> list[Path]:
        """The K2.5 curve run's checkpoints, ``"scratch"`` or ``"warm"``, in training order: SpecForge-style
        folders ``epoch_0_step_N`` (a drafter and ``training_state.pt``); each step read
        ``manifest["curve_batch"]`` fresh samples."""
        return [self.root / rel for rel in self.manifest["curves"][name]]

    @property
    def chain_steps(self) -> int:
        """Chain steps the drafters were trained for (training-time test): a K above it drafts steps they
        never learned, and their per-step acceptance collapses there."""
        return int(self.manifest.get("drafter_chain_steps", CHAIN_STEPS))

    def __str__(self) -> str:
        lines = [f"trained demo world at {self.root}"]
        lines += [f"  {kind}/{name}: {what}" for kind in ("targets", "drafters")
                  for name, what in self.manifest[kind].items()]
        lines.append(f"  drafters trained for {self.chain_steps} chain steps (training-time test)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:

        rows = [(f"{kind}/{name}", what) for kind in ("targets", "drafters") for name, what in self.manifest[kind].items()]
        rows.append(("drafters/*", f"trained for {self.chain_steps} chain steps (training-time test)"))
        return html_table(["path", "what"], rows, caption=f"trained demo world: {self.root}")


# -- the language -------------------------------------------------------------------------------------
def _grammar(rng) -> dict[str, np.ndarray]:
    """K2's rule (``k2``, over ``common``) and K2.5's (``k25``, over ``common25``): 40% of one permutation
    redrawn, and NEW_COMMON of K2's common tokens replaced by tokens K2 never produced by rule."""
    order = rng.permutation(VOCAB)
    common = np.sort(order[:COMMON])
    perm = np.stack([rng.choice(common, VOCAB), rng.choice(common, VOCAB)])     # (2, V)
    shifted = perm.copy()
    redraw = rng.random(VOCAB) < SHIFT
    shifted[1, redraw] = rng.choice(common, int(redraw.sum()))
    dropped = rng.choice(common, NEW_COMMON, replace=False)
    added = order[COMMON:COMMON + NEW_COMMON]
    swap = dict(zip(dropped.tolist(), added.tolist()))
    shifted = np.vectorize(lambda t: swap.get(int(t), int(t)))(shifted).astype(perm.dtype)
    common25 = np.sort(np.concatenate([np.setdiff1d(common, dropped), added]))
    return {"common": common, "common25": common25, "k2": perm, "k25": shifted}


def vocab_arrays(common: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(d2t, t2d) of a draft vocabulary that is exactly ``common`` (sorted target ids)."""
    t2d = np.zeros(VOCAB, bool)
    t2d[common] = True
    return common - np.arange(len(common)), t2d


def sample_language(rng, perm: np.ndarray, common: np.ndarray, n: int, length: int) -> np.ndarray:
    out = np.empty((n, length), np.int64)
    out[:, :2] = rng.choice(common, (n, 2))
    for i in range(2, length):
        rule = perm[out[:, i - 2] % 2, out[:, i - 1]]
        noise = rng.random(n) < NOISE
        out[:, i] = np.where(noise, rng.integers(0, VOCAB, n), rule)
    return out


# -- training -----------------------------------------------------------------------------------------
def _train_target(model, data: np.ndarray, *, steps: int, lr: float, seed: int) -> None:
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.from_numpy(data)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    for _ in range(steps):
        batch = x[torch.randint(0, len(x), (32,), generator=g)]
        loss = model(batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


def _target_features(model, data: np.ndarray) -> tuple[Any, Any]:
    """hidden_states [1..3] (outputs of layers 0..2) and argmax labels for every training sequence."""
    import torch

    with torch.no_grad():
        out = model(torch.from_numpy(data), output_hidden_states=True)
    aux = torch.stack([out.hidden_states[i + 1] for i in AUX_IDS], 1)   # (n, 3, T, H)
    return aux, out.logits.argmax(-1)                                   # (n, T)


def _drafter_init(seed: int) -> dict[str, Any]:
    import torch

    g = torch.Generator().manual_seed(seed)

    def w(*shape):
        return (torch.randn(*shape, generator=g) / shape[-1] ** 0.5).requires_grad_()

    def ones(n):
        return torch.ones(n).requires_grad_()

    p = "midlayer."
    hd = HIDDEN // HEADS
    return {"fc.weight": w(HIDDEN, len(AUX_IDS) * HIDDEN),
            p + "self_attn.q_proj.weight": w(HEADS * hd, 2 * HIDDEN), p + "self_attn.k_proj.weight": w(HEADS * hd, 2 * HIDDEN),
            p + "self_attn.v_proj.weight": w(HEADS * hd, 2 * HIDDEN), p + "self_attn.o_proj.weight": w(HIDDEN, HEADS * hd),
            p + "mlp.gate_proj.weight": w(INTER, HIDDEN), p + "mlp.up_proj.weight": w(INTER, HIDDEN),
            p + "mlp.down_proj.weight": w(HIDDEN, INTER), p + "hidden_norm.weight": ones(HIDDEN),
            p + "input_layernorm.weight": ones(HIDDEN), p + "post_attention_layernorm.weight": ones(HIDDEN),
            "norm.weight": ones(HIDDEN), "lm_head.weight": w(COMMON, HIDDEN)}


MLA_DIMS = {"q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 16}


def _mla_init(seed: int) -> dict[str, Any]:
    """An MLA EAGLE-3 layer (q_a/q_b, kv_a with the shared rotary key, kv_b, o) and a full-vocabulary head."""
    import torch

    g = torch.Generator().manual_seed(seed)

    def w(*shape):
        return (torch.randn(*shape, generator=g) / shape[-1] ** 0.5).requires_grad_()

    def ones(n):
        return torch.ones(n).requires_grad_()

    p, a, m = "midlayer.", "midlayer.self_attn.", MLA_DIMS
    qk = m["qk_nope_head_dim"] + m["qk_rope_head_dim"]
    return {"fc.weight": w(HIDDEN, len(AUX_IDS) * HIDDEN),
            a + "q_a_proj.weight": w(m["q_lora_rank"], 2 * HIDDEN), a + "q_a_layernorm.weight": ones(m["q_lora_rank"]),
            a + "q_b_proj.weight": w(HEADS * qk, m["q_lora_rank"]),
            a + "kv_a_proj_with_mqa.weight": w(m["kv_lora_rank"] + m["qk_rope_head_dim"], 2 * HIDDEN),
            a + "kv_a_layernorm.weight": ones(m["kv_lora_rank"]),
            a + "kv_b_proj.weight": w(HEADS * (m["qk_nope_head_dim"] + m["v_head_dim"]), m["kv_lora_rank"]),
            a + "o_proj.weight": w(HIDDEN, HEADS * m["v_head_dim"]),
            p + "mlp.gate_proj.weight": w(INTER, HIDDEN), p + "mlp.up_proj.weight": w(INTER, HIDDEN),
            p + "mlp.down_proj.weight": w(HIDDEN, INTER), p + "hidden_norm.weight": ones(HIDDEN),
            p + "input_layernorm.weight": ones(HIDDEN), p + "post_attention_layernorm.weight": ones(HIDDEN),
            "norm.weight": ones(HIDDEN), "lm_head.weight": w(VOCAB, HIDDEN)}


def mla_drafter_config() -> dict[str, Any]:
    """The MLA drafter's config, as TorchSpec's ``convert_to_hf.py --vllm`` writes a Kimi drafter: vLLM's
    architecture name, model_type kimi_k2, a full vocabulary, the aux ids shifted by one (inputs)."""
    return {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "kimi_k2", "hidden_size": HIDDEN,
            "intermediate_size": INTER, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
            "vocab_size": VOCAB, "draft_vocab_size": VOCAB, "num_hidden_layers": 1, **MLA_DIMS,
            "rope_theta": 10000.0, "max_position_embeddings": CONTEXT, "rms_norm_eps": 1e-6, "hidden_act": "silu",
            "torch_dtype": "bfloat16", "eaglekit_demo": LABEL,
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [i + 1 for i in AUX_IDS], "use_aux_hidden_state": True,
                             "use_input_layernorm_in_first_layer": True, "use_last_layernorm": True}}


def drafter_config(*, layout: str = "specforge") -> dict[str, Any]:
    layer = {"hidden_size": HIDDEN, "intermediate_size": INTER, "num_attention_heads": HEADS,
             "num_key_value_heads": HEADS, "head_dim": HIDDEN // HEADS, "vocab_size": VOCAB, "rms_norm_eps": 1e-6,
             "rope_theta": 10000.0, "max_position_embeddings": CONTEXT, "hidden_act": "silu", "num_hidden_layers": 1,
             "torch_dtype": "bfloat16"}
    if layout == "specforge":
        return {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", **layer,
                "draft_vocab_size": COMMON, "eaglekit_demo": LABEL,
                "eagle_config": {"eagle_aux_hidden_state_layer_ids": AUX_IDS, "use_aux_hidden_state": True}}
    return {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "draft_vocab_size": COMMON,
            "norm_before_residual": False, "target_hidden_size": HIDDEN,
            "eagle_aux_hidden_state_layer_ids": [i + 1 for i in AUX_IDS],   # vLLM counts inputs
            "transformer_layer_config": {"model_type": "llama", **layer}, "eaglekit_demo": LABEL}


def _train_drafter(tensors: dict[str, Any], embed, d2t, t2d_index, tokens, aux, labels, *, steps: int, lr: float,
                   seed: int, ttt: int = CHAIN_STEPS, batches=None, on_step=None,
                   config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Training-time test: K chain steps over every position at once, cross-entropy against the target's
    argmax mapped to draft rows (tokens outside the draft vocabulary are skipped).

    ``batches``: the sample indices of each step (default: 4 drawn at random); ``on_step(step, tensors)``
    after each step (1-based), to save checkpoints."""
    import torch
    import torch.nn.functional as F


    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(list(tensors.values()), lr=lr, weight_decay=0.0)
    T = aux.shape[2]
    for step in range(1, steps + 1):
        loss = torch.zeros(())
        model = DraftModel.from_tensors(config or drafter_config(), {**tensors, "d2t": d2t}, embed=embed)
        picks = batches[step - 1] if batches is not None else torch.randint(0, len(aux), (4,), generator=g).tolist()
        for i in picks:
            h = model.project(aux[i])
            # entry s = (features at s, x_{s+1}); step j from s predicts the target's argmax after s + j
            out = model.chain(h[:T - 1], tokens[i, 1:], ttt, return_logits=True)
            for j, logits in enumerate(out.logits, start=1):
                tgt = t2d_index[labels[i, j:]]
                n = min(len(tgt), logits.shape[0])
                loss = loss + F.cross_entropy(logits[:n], tgt[:n], ignore_index=-1) / ttt
        opt.zero_grad()
        loss.backward()
        opt.step()
        if on_step is not None:
            on_step(step, tensors)
    return {k: v.detach() for k, v in tensors.items()}


def _save_drafter(folder: Path, tensors: dict[str, Any], d2t, t2d, *, layout: str = "specforge",
                  config: dict[str, Any] | None = None) -> None:
    """(``d2t`` None: a full-vocabulary drafter, saved without a map.)"""
    """Save as published drafters are: bf16 weights (trained in float32), int64 d2t, bool t2d."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    out = {(k.replace("midlayer.", "layers.0.") if layout == "speculators" else k):
           v.detach().to(torch.bfloat16).contiguous() for k, v in tensors.items()}
    if d2t is not None:
        out["d2t"] = torch.as_tensor(d2t, dtype=torch.int64)
        out["t2d"] = torch.as_tensor(t2d, dtype=torch.bool)
    save_file(out, str(folder / "model.safetensors"), metadata={"format": "pt", "eaglekit_demo": LABEL})
    (folder / "config.json").write_text(json.dumps(config or drafter_config(layout=layout), indent=2) + "\n")


def _write_broken(folder: Path, tensors: dict[str, Any], config: dict[str, Any], d2t, t2d) -> None:
    _save_drafter(folder, tensors, d2t, t2d, config=config)


def _save_target(model, folder: Path) -> None:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    with quiet_loading():
        model.save_pretrained(str(folder))
    vocab = {f"t{i}": i for i in range(VOCAB)}
    tok = Tokenizer(WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0")
    fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    fast.save_pretrained(str(folder))


def target_config():
    """The tiny target's transformers config: Kimi-K2's architecture (DeepseekV3: MLA attention, a dense
    first layer, routed and shared experts) at toy size."""
    from transformers import DeepseekV3Config

    return DeepseekV3Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, moe_intermediate_size=MOE_INTER,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=HEADS, n_routed_experts=EXPERTS,
        num_experts_per_tok=TOP_K, n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1,
        q_lora_rank=Q_LORA, kv_lora_rank=KV_LORA, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
        max_position_embeddings=CONTEXT, rope_theta=10000.0, tie_word_embeddings=False, bos_token_id=None,
        eos_token_id=None, pad_token_id=None)


def _target_model():
    from transformers import DeepseekV3ForCausalLM

    return DeepseekV3ForCausalLM(target_config())


def build_trained_demo(path: str | os.PathLike[str], *, force: bool = False, progress: bool | None = None) -> TrainedWorld:
    """Train (or reuse) the trained demo world at ``path``."""

    root = Path(path)
    built_once(root, {"trained": TRAINED_VERSION}, lambda folder: _build(folder, progress=progress),
               ours=lambda folder: _read_manifest(folder) is not None, force=force, what="trained demo")
    return TrainedWorld(root, _read_manifest(root) or {})


def _read_manifest(root: Path) -> dict[str, Any] | None:
    try:
        m = json.loads((root / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    # any version's label: an older world (another label) is still ours to rebuild
    return m if isinstance(m, dict) and str(m.get("label", "")).startswith("SYNTHETIC trained demo (") else None


def _build(root: Path, *, progress: bool | None) -> TrainedWorld:
    import torch
    from tqdm.auto import tqdm

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    bar = tqdm(total=10, desc="training the demo world", disable=progress is False, leave=False)
    try:
        rng = np.random.default_rng(20261130)
        torch.manual_seed(20261130)
        gram = _grammar(rng)
        common, common25 = gram["common"], gram["common25"]
        k2_data = sample_language(rng, gram["k2"], common, 512, SEQ)
        k25_data = sample_language(rng, gram["k25"], common25, 512, SEQ)
        k25_few = k25_data[:FEW_SAMPLES]

        k2 = _target_model()
        _train_target(k2, k2_data, steps=350, lr=3e-3, seed=1)
        bar.update()
        _save_target(k2, root / "targets" / "k2")
        k25 = _target_model()
        k25.load_state_dict(k2.state_dict())
        _train_target(k25, k25_data, steps=200, lr=2e-3, seed=2)
        _save_target(k25, root / "targets" / "k25")
        bar.update()

        def train(tensors, target, vocab, data, steps, seed, **kw):
            d2t, _ = vocab_arrays(vocab)
            t2d_index = torch.full((VOCAB,), -1, dtype=torch.int64)
            t2d_index[torch.from_numpy(vocab)] = torch.arange(len(vocab))
            embed = target.get_input_embeddings().weight.detach()
            aux, labels = _target_features(target, data)
            return _train_drafter(tensors, embed, torch.from_numpy(d2t), t2d_index, torch.from_numpy(data), aux,
                                  labels, steps=steps, lr=kw.pop("lr", 3e-3), seed=seed, **kw)

        drafters = root / "drafters"
        k2_drafter = train(_drafter_init(3), k2, common, k2_data[:256], 300, 3)
        _save_drafter(drafters / "k2", k2_drafter, *vocab_arrays(common))
        _save_drafter(drafters / "k2-speculators", k2_drafter, *vocab_arrays(common), layout="speculators")
        broken = build_broken(root / "broken", torch.Generator().manual_seed(8), k2_drafter, *vocab_arrays(common),
                              write=_write_broken, config=drafter_config(), layers=LAYERS)
        bar.update()
        scratch = train(_drafter_init(4), k25, common25, k25_few, FEW_STEPS, 4)
        _save_drafter(drafters / "k25-scratch", scratch, *vocab_arrays(common25))
        bar.update()
        warm = train(_warm_start(root), k25, common25, k25_few, FEW_STEPS, 4)
        _save_drafter(drafters / "k25-warm", warm, *vocab_arrays(common25))
        every = np.arange(VOCAB)          # a full-vocabulary head: draft row i is target id i
        mla = train(_mla_init(9), k25, every, k25_data[:256], 300, 9, config=mla_drafter_config())
        _save_drafter(drafters / "k25-mla", mla, None, None, layout="speculators", config=mla_drafter_config())
        fresh = sample_language(rng, gram["k25"], common25, CURVE_POOL, SEQ)
        curves = _curve_runs(root, train, k25, common25, fresh)
        bar.update()
        _save_drafter(drafters / "random", {k: v.detach() for k, v in _drafter_init(5).items()}, *vocab_arrays(common))
        bar.update()

        prng = np.random.default_rng(7)
        for name, perm, vocab in (("k2", gram["k2"], common), ("k25", gram["k25"], common25)):
            held = sample_language(prng, perm, vocab, 12, 10)
            (root / f"prompts-{name}.jsonl").write_text("".join(json.dumps({"input_ids": p.tolist()}) + "\n" for p in held))
        chat = sample_language(prng, gram["k2"], common, 3, 8)
        (root / "prompts-chat.jsonl").write_text("".join(
            json.dumps({"messages": [{"role": "user", "content": " ".join(f"t{i}" for i in p)}]}) + "\n" for p in chat))
        bar.update()
        weights = _target_forms(root, k2, k25)
        bar.update()
        dumps = _hidden_dumps(root)
        bar.update()
        # last, with its own seeds: every other model of the world is bit-identical to version 6's
        mask = mask_token_id(common, common25, VOCAB)
        dcfg = dflash_config(mask=mask, vocab=VOCAB, hidden=HIDDEN, target_layers=LAYERS, label=LABEL,
                             max_positions=CONTEXT)
        save_dflash(drafters / "k25-dflash", train_dflash(k25, k25_few, dcfg), dcfg, label=LABEL)
        bar.update()
    finally:
        torch.set_num_threads(threads)
        bar.close()
    manifest = {
        "version": TRAINED_VERSION, "label": LABEL, "build": uuid.uuid4().hex,  # tells a rebuild from the last one
        "targets": {"k2": f"tiny Kimi-K2-shaped MoE (DeepseekV3: MLA, {EXPERTS} routed experts top {TOP_K} + 1 shared; "
                          f"{LAYERS} layers, hidden {HIDDEN}, vocab {VOCAB}) trained on the token language",
                    "k25": f"k2 continued on the shifted language ({SHIFT:.0%} of one rule redrawn, "
                           f"{NEW_COMMON} common tokens swapped)"},
        "drafters": {"k2": "EAGLE-3 drafter trained on k2 (SpecForge layout, aux ids [0, 1, 2], outputs)",
                     "k2-speculators": "the same weights in the speculators layout (ids [1, 2, 3], inputs)",
                     "k25-scratch": f"trained from scratch on k25 with {FEW_SAMPLES} samples (k25's draft vocabulary)",
                     "k25-warm": f"k2's drafter exported onto k25-scratch's vocabulary map, fine-tuned on the same "
                                 f"{FEW_SAMPLES} k25 samples",
                     "k25-mla": "the public-drafter stand-in: an MLA EAGLE-3 drafter (full vocabulary, no d2t/t2d) "
                                "trained on k25 with 256 samples, saved as TorchSpec's vLLM export (layers.0.*, "
                                "kimi_k2, aux ids [1, 2, 3], inputs)",
                     "k25-dflash": f"a DFlash block drafter (block {BLOCK}: K = 1..{BLOCK - 1} drafts in one forward; "
                                   f"{DRAFT_LAYERS} Qwen3 layer; the target's embedding and lm_head) trained with the "
                                   f"authors' objective on the same {FEW_SAMPLES} k25 samples and target features "
                                   f"(outputs of layers 0-2) as k25-scratch and k25-warm",
                     "random": "untrained (random weights)"},
        "dflash": {"drafter": "drafters/k25-dflash", "block_size": BLOCK, "mask_token_id": mask,
                   "mask_token": "the highest id outside both languages' common tokens (neither grammar produces "
                                 "it; it appears only as noise): the demo's stand-in for a reserved token"},
        "curves": curves, "curve_batch": CURVE_BATCH,
        "broken": broken, "target_weights": weights, "hidden_states": dumps,
        "draft_vocab": COMMON, "vocab": VOCAB, "drafter_chain_steps": CHAIN_STEPS,
        "common_k2": [int(t) for t in common], "common_k25": [int(t) for t in common25],
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return TrainedWorld(root, manifest)


def _curve_runs(root: Path, train, k25, common25, data: np.ndarray) -> dict[str, list[str]]:
    """Two single-epoch K2.5 runs on fresh samples, from scratch and from the warm start, each saving a
    SpecForge-style checkpoint (``epoch_0_step_N``: the drafter, and ``training_state.pt`` holding
    ``{"epoch": 0, "global_step": N}``) at every step of :data:`CURVE_CHECKPOINTS`."""
    import torch

    steps = max(CURVE_CHECKPOINTS)
    fresh = data[:steps * CURVE_BATCH]
    batches = [list(range(s * CURVE_BATCH, (s + 1) * CURVE_BATCH)) for s in range(steps)]
    out: dict[str, list[str]] = {}
    for name, init in (("scratch", _drafter_init(4)), ("warm", _warm_start(root))):
        folders: list[str] = []

        def save(step, tensors, name=name, folders=folders):
            if step in CURVE_CHECKPOINTS:
                rel = f"checkpoints/k25-{name}/epoch_0_step_{step}"
                _save_drafter(root / rel, {k: v.detach() for k, v in tensors.items()}, *vocab_arrays(common25))
                torch.save({"epoch": 0, "global_step": step}, root / rel / "training_state.pt")
                folders.append(rel)

        train(init, k25, common25, fresh, steps, 6, batches=batches, on_step=save, lr=CURVE_LR)
        out[name] = folders
    return out


def _warm_start(root: Path) -> dict[str, Any]:
    """k2's drafter as ``eaglekit export`` turns it into a K2.5 warm start: lm_head rows re-aligned to
    k25-scratch's vocabulary map by target token, rows of the new tokens from k25's lm_head."""
    import tempfile

    from safetensors.torch import load_file

    with tempfile.TemporaryDirectory(dir=root) as tmp:
        out = Path(tmp) / "warm-start"
        export(root / "drafters" / "k2", out, vocab_map=root / "drafters" / "k25-scratch", target=root / "targets" / "k25",
               progress=False)
        tensors = load_file(str(out / "model.safetensors"))
    return {k: v.float().clone().requires_grad_() for k, v in tensors.items() if k not in ("d2t", "t2d")}


def _target_forms(root: Path, k2, k25) -> dict[str, str]:
    """Both targets' trained weights in their shipping layouts (FP8 blocks, INT4 under language_model.)."""
    def strip(model):
        return {(k[len("model."):] if k.startswith("model.") else k): v.detach().float()
                for k, v in model.state_dict().items()}

    text = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", **{
        k: v for k, v in target_config().to_dict().items()
        if k in ("vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
                 "num_attention_heads", "num_key_value_heads", "n_routed_experts", "num_experts_per_tok",
                 "n_shared_experts", "first_k_dense_replace", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim",
                 "qk_nope_head_dim", "v_head_dim", "max_position_embeddings", "rope_theta", "rms_norm_eps")},
        "eaglekit_demo": LABEL}
    return write_target_forms(root / "target-weights", strip(k2), strip(k25), text)


#: Hidden-state indices the dumps hold: the outputs of the drafters' aux layers 0, 1, 2 and of the last layer.
DUMP_LAYERS = (1, 2, 3, 4)


def _hidden_dumps(root: Path) -> dict[str, str]:
    """Each target's hidden states on the K2.5 prompts, through the kit's own ``dump-hidden``."""
    out = {}
    for name in ("k2", "k25"):
        out[name] = f"hidden-states/{name}"
        target = load_target_model(root / "targets" / name)
        target.name = f"targets/{name}"   # the world's own name for it, not the folder it is built in
        dump_hidden_states(target, root / "prompts-k25.jsonl", root / out[name], layers=DUMP_LAYERS,
                           max_new_tokens=24, progress=False)
    return out
