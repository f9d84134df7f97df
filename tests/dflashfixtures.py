"""Tiny, deterministic DFlash worlds for tests: a random Qwen3 target saved with safetensors, and DFlash drafter
checkpoints (config.json + model.safetensors) for it, random or briefly trained on the target's greedy text."""

from __future__ import annotations

import json
from pathlib import Path

import torch

VOCAB, HIDDEN, TARGET_LAYERS = 96, 32, 4
MASK_ID = VOCAB - 1
EOS_ID = 7


def make_target(folder: Path, *, seed: int = 0) -> Path:
    """A 4-layer Qwen3 causal LM (vocab 96, hidden 32), random with ``seed``, saved to ``folder``."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=TARGET_LAYERS,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
                      initializer_range=0.3, tie_word_embeddings=False, eos_token_id=EOS_ID, bos_token_id=0,
                      pad_token_id=0)
    model = Qwen3ForCausalLM(cfg).eval()
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def drafter_config(*, block_size: int = 4, layers: int = 2, target_layer_ids=(0, 2), mask: int = MASK_ID,
                   **extra) -> dict:
    cfg = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "block_size": block_size,
        "dflash_config": {"mask_token_id": mask, "target_layer_ids": list(target_layer_ids)},
        "num_target_layers": TARGET_LAYERS, "num_hidden_layers": layers, "hidden_size": HIDDEN,
        "intermediate_size": 64, "head_dim": 8, "num_attention_heads": 4, "num_key_value_heads": 2,
        "attention_bias": False, "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "rope_scaling": None, "max_position_embeddings": 256, "tie_word_embeddings": False, "vocab_size": VOCAB,
    }
    cfg.update(extra)
    return cfg


def dflash2_config(*, block_size: int = 4, layers: int = 2, target_layer_ids=(0, 2), window: int | None = 5,
                   **nested) -> dict:
    """A GQA DFlash2 config in z-lab's layout (every block key inside dflash_config): group size 8 over hidden 32,
    kernel 2, a selector of rank 8 over the top 4; sliding layers of ``window`` (None: full attention)."""
    cfg = drafter_config(block_size=block_size, layers=layers, target_layer_ids=target_layer_ids)
    cfg["architectures"] = ["DFlash2DraftModel"]
    del cfg["block_size"]
    cfg["dflash_config"].update({"block_size": block_size, "conv_group_size": 8, "conv_kernel_size": 2,
                                 "final_logit_softcapping": 20.0, "output_multiplier": 0.5, "selector_rank": 8,
                                 "selector_top_k": 4, "attention_mode": "gqa", **nested})
    cfg.update({"is_causal": False, "sliding_window": window, "use_sliding_window": window is not None,
                "layer_types": ["sliding_attention" if window else "full_attention"] * layers})
    return cfg


def dspark_config(*, block_size: int = 4, layers: int = 2, target_layer_ids=(0, 2), rank: int = 8,
                  head: str = "vanilla", confidence: bool = True, with_markov: bool = True) -> dict:
    """A DSpark config in DeepSpec's layout (``Qwen3DSparkModel``, every key at the top level)."""
    cfg = drafter_config(block_size=block_size, layers=layers, target_layer_ids=target_layer_ids)
    del cfg["dflash_config"]
    cfg.update({"architectures": ["Qwen3DSparkModel"], "mask_token_id": MASK_ID,
                "target_layer_ids": list(target_layer_ids), "num_anchors": 8, "markov_rank": rank,
                "markov_head_type": head, "enable_confidence_head": confidence,
                "confidence_head_with_markov": with_markov, "layer_types": ["full_attention"] * layers})
    return cfg


def target_copies(target_dir: Path) -> dict[str, torch.Tensor]:
    """The target's embedding and lm_head under a DSpark checkpoint's names (DeepSpec keeps frozen copies)."""
    from safetensors.torch import load_file

    t = load_file(str(target_dir / "model.safetensors"))
    return {"embed_tokens.weight": t["model.embed_tokens.weight"], "lm_head.weight": t["lm_head.weight"]}


def random_tensors(cfg: dict, *, seed: int = 1, std: float = 0.15) -> dict[str, torch.Tensor]:
    """Every tensor its config implies (DFlash, DFlash2), random: norm weights near one, convolutions near the
    identity (slot t's own value weighted about one), codebooks wide enough that the selector's pair scores
    sometimes overrule the top logit."""
    from eaglekit.core.configs.block import read_block_config
    from eaglekit.core.configs.block_shapes import expected_tensors

    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, (shape, _) in expected_tensors(read_block_config(cfg)).items():
        t = torch.randn(shape, generator=g) * (0.6 if "codebook" in name or "markov_w" in name else std)
        if name.endswith("base_kernel"):
            t[:, 0] += 1.0
        out[name] = (1.0 + t) if "norm" in name else t
    return out


def save_drafter(folder: Path, cfg: dict, tensors: dict[str, torch.Tensor], *, prefix: str = "") -> Path:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    save_file({prefix + n: t.detach().contiguous().float() for n, t in tensors.items()},
              str(folder / "model.safetensors"))
    return folder


def greedy_texts(target_dir: Path, prompts: list[list[int]], *, max_new_tokens: int, layers) -> list:
    """(token ids, features in ``layers`` order) of each prompt's greedy continuation."""
    from eaglekit.analysis.acceptance.target import load_target_model

    tm = load_target_model(str(target_dir))
    out = []
    for ids in prompts:
        s = tm.run(ids, max_new_tokens=max_new_tokens, layers=list(layers))
        out.append((s.input_ids, s.hidden_states.permute(1, 0, 2).reshape(s.input_ids.shape[0], -1), len(ids)))
    return out, tm


def train_drafter(target_dir: Path, cfg: dict, *, steps: int = 300, seed: int = 3) -> dict[str, torch.Tensor]:
    """A block drafter fitted for a few hundred Adam steps to the target's greedy continuations of random prompts
    (blocks at every anchor, cross-entropy on the draft slots through the target's lm_head; DFlash2's convolutions
    train, its selector stays random; DSpark's vanilla Markov head trains, teacher-forced)."""
    from eaglekit.analysis.acceptance.block import drafter_class
    from eaglekit.analysis.acceptance.block_target import target_parts_from_model
    from eaglekit.core.configs.block import read_block_config

    prompts = train_prompts()
    config = read_block_config(cfg)
    data, tm = greedy_texts(target_dir, prompts, max_new_tokens=40, layers=config.hidden_state_indices())
    parts = target_parts_from_model(tm.model, name="target")
    params = {n: t.clone().requires_grad_(True) for n, t in random_tensors(cfg, seed=seed).items()}
    drafter = drafter_class(config)(config, params, source="train")
    drafter.w = params  # the forward reads these very tensors: gradients reach them
    opt = torch.optim.Adam(params.values(), lr=3e-3)
    Q = config.block_size
    for step in range(steps):
        ids, feats, n = data[step % len(data)]
        T = ids.shape[0]
        starts = torch.arange(n - 1, T - Q)                                       # (B,)
        if len(starts) == 0:
            continue
        block = torch.full((len(starts), Q), MASK_ID)
        block[:, 0] = ids[starts]
        hidden = drafter.forward(drafter.context(feats), parts.rows(block, device=torch.device("cpu"),
                                                                      dtype=torch.float32), starts)
        hidden = hidden[:, 0 if config.anchor_drafts else 1:]                     # (B, S, H): DSpark's shift
        logits = hidden @ parts.head.lm_head.T                                    # (B, S, V)
        labels = ids[starts[:, None] + torch.arange(1, hidden.shape[1] + 1)[None, :]]   # (B, S)
        if config.markov_rank:  # the vanilla Markov bias, teacher-forced
            prev = torch.cat([block[:, :1], labels[:, :-1]], 1)                   # (B, S)
            logits = logits + params["markov_head.markov_w1.weight"][prev] @ params["markov_head.markov_w2.weight"].T
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {n: p.detach() for n, p in params.items()}


def train_prompts(n: int = 24, *, seed: int = 3) -> list[list[int]]:
    """The random prompts :func:`train_drafter` fits to (measuring on some of them shows a drafter that accepts)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(1, VOCAB - 1, (6,), generator=g).tolist() for _ in range(n)]


def prompt_ids(world_root: Path) -> list[list[int]]:
    """The token ids of a world's prompts.jsonl, one list per line."""
    return [json.loads(line)["input_ids"] for line in (world_root / "prompts.jsonl").read_text().splitlines()]


def write_prompts(path: Path, prompts: list[list[int]]) -> Path:
    path.write_text("".join(json.dumps({"input_ids": p}) + "\n" for p in prompts))
    return path


_WORLDS: dict[str, Path] = {}


def world(tmp_path_factory) -> Path:
    """A target, a trained block-4 drafter, random block-4 and block-6 drafters and prompts, built once per test
    process (training takes seconds)."""
    key = "dflash"
    if key not in _WORLDS:
        root = tmp_path_factory.mktemp("dflash-world")
        make_target(root / "target")
        cfg4 = drafter_config(block_size=4)
        save_drafter(root / "trained", cfg4, train_drafter(root / "target", cfg4))
        save_drafter(root / "random", cfg4, random_tensors(cfg4, seed=5))
        cfg6 = drafter_config(block_size=6, layers=1, target_layer_ids=(1, 2, 3))
        save_drafter(root / "random6", cfg6, random_tensors(cfg6, seed=6), prefix="model.")
        write_prompts(root / "prompts.jsonl", train_prompts()[:4] + [[3, 5, 9, 11], [60, 61]])
        _WORLDS[key] = root
    return _WORLDS[key]


def world2(tmp_path_factory) -> Path:
    """:func:`world`'s target and prompts with DFlash2 drafters: ``trained2`` (block 4, sliding window 5, trained
    briefly), ``random2`` (block 6, full attention, its tensors saved with a ``model.`` prefix and the codebooks as
    ``nn.Embedding`` weights) and ``scaled2`` (block 4, window 3, causal, ``input_embedding_scale`` 2)."""
    key = "dflash2"
    if key not in _WORLDS:
        root = tmp_path_factory.mktemp("dflash2-world")
        make_target(root / "target")
        cfg = dflash2_config(block_size=4)
        save_drafter(root / "trained2", cfg, train_drafter(root / "target", cfg, steps=200))
        cfg6 = dflash2_config(block_size=6, layers=1, target_layer_ids=(1, 2, 3), window=None)
        t6 = {(n + ".weight" if "codebook" in n else n): t for n, t in random_tensors(cfg6, seed=6).items()}
        save_drafter(root / "random2", cfg6, t6, prefix="model.")
        cfg3 = dflash2_config(block_size=4, window=3, input_embedding_scale=2.0)
        cfg3["is_causal"] = True
        save_drafter(root / "scaled2", cfg3, random_tensors(cfg3, seed=7))
        write_prompts(root / "prompts.jsonl", train_prompts()[:4] + [[3, 5, 9, 11], [60, 61]])
        _WORLDS[key] = root
    return _WORLDS[key]


def world3(tmp_path_factory) -> Path:
    """:func:`world`'s target and prompts with DSpark drafters sharing one briefly trained backbone: ``trainedsp``
    (DeepSpec's layout, block 4, a trained vanilla Markov head, a confidence head reading it, the target's embedding
    and lm_head copied in), ``gatedsp`` (block 5, gated head, confidence on the hidden state alone, no copies: it
    drafts through the target's, tensors saved with a ``model.`` prefix), ``rnnsp`` (block 3, rnn head, its OWN
    embedding and lm_head: the target's plus noise) and ``specforgesp`` (SpecForge's ``DSparkDraftModel`` layout:
    keys in dflash_config, drafts from slots 1..)."""
    key = "dspark"
    if key not in _WORLDS:
        root = tmp_path_factory.mktemp("dspark-world")
        make_target(root / "target")
        copies = target_copies(root / "target")
        cfg = dspark_config(block_size=4)
        trained = train_drafter(root / "target", cfg, steps=200)
        save_drafter(root / "trainedsp", cfg, {**trained, **copies})
        backbone = {n: t for n, t in trained.items() if not n.startswith(("markov_head.", "confidence_head."))}
        cfg5 = dspark_config(block_size=5, head="gated", with_markov=False)
        save_drafter(root / "gatedsp", cfg5, {**random_tensors(cfg5, seed=8), **backbone}, prefix="model.")
        cfg3 = dspark_config(block_size=3, head="rnn")
        g = torch.Generator().manual_seed(9)
        own = {n: t + torch.randn(t.shape, generator=g) * 0.05 for n, t in copies.items()}
        save_drafter(root / "rnnsp", cfg3, {**random_tensors(cfg3, seed=9), **backbone, **own})
        sf = drafter_config(block_size=4)
        sf["architectures"] = ["DSparkDraftModel"]
        sf["dflash_config"].update({"projector_type": "dspark", "markov_rank": 8, "markov_head_type": "vanilla",
                                    "enable_confidence_head": False, "attention_mode": "gqa"})
        save_drafter(root / "specforgesp", sf, {**random_tensors(sf, seed=10), **backbone})
        write_prompts(root / "prompts.jsonl", train_prompts()[:4] + [[3, 5, 9, 11], [60, 61]])
        _WORLDS[key] = root
    return _WORLDS[key]
