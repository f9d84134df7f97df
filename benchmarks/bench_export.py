"""Benchmark: the warm-start export, streamed, against the naive way (load everything, index, save).

A synthetic drafter in the SpecForge layout (hidden 2048, 16 heads, intermediate 5632, vocabulary
64,000, draft vocabulary 32,000, BF16: about 290 MB) and a target head (embedding + lm_head), written
under ``--data``. Both methods re-align lm_head to another vocabulary map (75% of tokens shared; the
others' rows from the target's lm_head) and write a new checkpoint. Each runs in a fresh subprocess;
peak RSS (ru_maxrss) and wall time are reported, interleaved over ``--repeat`` runs, medians.

- eaglekit ``export`` (byte ranges in, chunks out; lm_head in runs of rows);
- naive: ``safetensors.torch.load_file`` of drafter and target, ``torch.cat`` of gathered rows,
  ``save_file``.

    python benchmarks/bench_export.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

H, HEADS, HEAD_DIM, INTER, VOCAB, DRAFT = 2048, 16, 128, 5632, 64000, 32000


def build(data: Path) -> dict[str, Path]:
    import numpy as np
    import torch
    from safetensors.torch import save_file

    from eaglekit.core.tokens.vocab import build_vocab_map

    paths = {k: data / k for k in ("drafter", "target", "map")}
    if all((p / "done").exists() for p in paths.values()):
        return paths
    rng = np.random.default_rng(0)
    gen = torch.Generator().manual_seed(0)
    w = lambda *s: (torch.randn(*s, generator=gen) * 0.02).to(torch.bfloat16)  # noqa: E731
    order = rng.permutation(VOCAB)
    old_ids, new_ids = order[:DRAFT], np.concatenate([order[:DRAFT * 3 // 4], order[DRAFT:DRAFT + DRAFT // 4]])
    d2t, t2d = build_vocab_map(old_ids, VOCAB)
    qkv = HEADS * HEAD_DIM
    tensors = {"fc.weight": w(H, 3 * H), "midlayer.self_attn.q_proj.weight": w(qkv, 2 * H),
               "midlayer.self_attn.k_proj.weight": w(qkv, 2 * H), "midlayer.self_attn.v_proj.weight": w(qkv, 2 * H),
               "midlayer.self_attn.o_proj.weight": w(H, qkv), "midlayer.mlp.gate_proj.weight": w(INTER, H),
               "midlayer.mlp.up_proj.weight": w(INTER, H), "midlayer.mlp.down_proj.weight": w(H, INTER),
               "midlayer.hidden_norm.weight": w(H), "midlayer.input_layernorm.weight": w(H),
               "midlayer.post_attention_layernorm.weight": w(H), "norm.weight": w(H),
               "lm_head.weight": w(DRAFT, H), "d2t": torch.from_numpy(d2t), "t2d": torch.from_numpy(t2d)}
    config = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": H, "intermediate_size": INTER,
              "num_attention_heads": HEADS, "num_key_value_heads": HEADS, "head_dim": HEAD_DIM, "num_hidden_layers": 1,
              "vocab_size": VOCAB, "draft_vocab_size": DRAFT, "torch_dtype": "bfloat16", "rope_theta": 1e6,
              "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}}
    target = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "hidden_size": H, "vocab_size": VOCAB}
    for p in paths.values():
        p.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(paths["drafter"] / "model.safetensors"))
    (paths["drafter"] / "config.json").write_text(json.dumps(config))
    save_file({"model.embed_tokens.weight": w(VOCAB, H), "lm_head.weight": w(VOCAB, H)},
              str(paths["target"] / "model.safetensors"))
    (paths["target"] / "config.json").write_text(json.dumps(target))
    nd2t, nt2d = build_vocab_map(new_ids, VOCAB)
    save_file({"d2t": torch.from_numpy(nd2t), "t2d": torch.from_numpy(nt2d)}, str(paths["map"] / "vocab.safetensors"))
    for p in paths.values():
        (p / "done").write_text("")
    return paths


def child(method: str, data: str) -> dict:
    import shutil

    paths = {k: Path(data) / k for k in ("drafter", "target", "map")}
    out = Path(data) / f"out-{method}"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    if method == "eaglekit":
        from eaglekit.analysis.compat.export import export

        export(paths["drafter"], out, vocab_map=paths["map"] / "vocab.safetensors", target=paths["target"],
               progress=False)
    else:
        import numpy as np
        import torch
        from safetensors.torch import load_file, save_file

        from eaglekit.core.tokens.vocab import target_ids

        src = load_file(str(paths["drafter"] / "model.safetensors"))
        head = load_file(str(paths["target"] / "model.safetensors"))["lm_head.weight"]
        new = load_file(str(paths["map"] / "vocab.safetensors"))
        old_t, new_t = target_ids(src["d2t"].numpy()), target_ids(new["d2t"].numpy())
        pos = np.minimum(np.searchsorted(old_t, new_t), old_t.size - 1)
        hit = torch.from_numpy(old_t[pos] == new_t)
        rows = torch.where(hit.unsqueeze(1), src["lm_head.weight"][torch.from_numpy(pos)],
                           head[torch.from_numpy(new_t)])  # (N, H)
        src.update({"lm_head.weight": rows.contiguous(), "d2t": new["d2t"], "t2d": new["t2d"]})
        out.mkdir()
        save_file(src, str(out / "model.safetensors"))
    seconds = time.perf_counter() - t0
    return {"method": method, "seconds": seconds, "peak_mib": _hwm()}


def _hwm() -> float:
    """Peak RSS of this process image in MiB (VmHWM: ru_maxrss survives exec and would show the parent's)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=HERE / "data" / "export")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", nargs=2, metavar=("METHOD", "DATA"))
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    build(args.data)
    size = sum(f.stat().st_size for f in (args.data / "drafter").iterdir())
    baseline = json.loads(subprocess.run([sys.executable, "-c", "import torch, safetensors, numpy, pathlib;"
                                          "print([int(l.split()[1]) / 1024 for l in pathlib.Path('/proc/self/status')"
                                          ".read_text().splitlines() if l.startswith('VmHWM:')][0])"],
                                         capture_output=True, text=True, check=True).stdout)
    runs: dict[str, list[dict]] = {"eaglekit": [], "naive": []}
    for _ in range(args.repeat):
        for method in runs:
            r = subprocess.run([sys.executable, __file__, "--child", method, str(args.data)], capture_output=True,
                               text=True, check=True)
            runs[method].append(json.loads(r.stdout.strip().splitlines()[-1]))
    med = {m: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "peak_mib")} for m, rs in runs.items()}
    print(f"drafter {size / 2**20:.0f} MiB; a bare interpreter with torch, safetensors, numpy imported peaks at "
          f"{baseline:.0f} MiB")
    for m, v in med.items():
        print(f"{m:9s} {v['seconds']:.2f} s  peak RSS {v['peak_mib']:.0f} MiB")
    e, n = med["eaglekit"], med["naive"]
    print(f"ratio: time {n['seconds'] / e['seconds']:.2f}x faster, peak RSS {n['peak_mib'] / e['peak_mib']:.1f}x "
          f"smaller (eaglekit imports no torch when no dtype changes)")

if __name__ == "__main__":
    main()
