"""The tensors a block drafter's config implies (per family), against header shapes; the engine table."""

from __future__ import annotations

from blockfixtures import (DFLASH2_CONFIG, DFLASH_CONFIG, DSPARK_CONFIG, dflash2_shapes, dflash_shapes, dspark_shapes,
                           edited)
from eaglekit.core.configs.block import read_block_config
from eaglekit.core.configs.block_engines import block_engine
from eaglekit.core.configs.block_shapes import block_shapes, block_tensor_name, expected_tensors


def test_fixtures_match_their_configs():
    for config, shapes, count in ((DFLASH_CONFIG, dflash_shapes(), 25), (DFLASH2_CONFIG, dflash2_shapes(), 36),
                                  (DSPARK_CONFIG, dspark_shapes(), 31)):
        r = block_shapes(read_block_config(config), shapes)
        assert r.consistent and r.expected == r.matching == count and not r.unknown


def test_shapes_from_the_config():
    want = expected_tensors(read_block_config(DFLASH2_CONFIG))
    assert want["fc.weight"][0] == (32, 64)
    assert want["layers.1.self_attn.k_proj.weight"][0] == (16, 32)
    assert want["layers.0.self_attn.q_norm.weight"][0] == (8,)
    assert want["layers.0.attention_conv.kernel_projection.weight"] == (
        (16, 32), "2 x conv_kernel_size 2 x (hidden_size 32 / conv_group_size 8)")
    assert want["candidate_selector.successor_codebook"][0] == (128, 8)
    spark = expected_tensors(read_block_config(DSPARK_CONFIG))
    assert spark["confidence_head.proj.weight"][0] == (1, 40) and spark["markov_head.gate_proj.weight"][0] == (8, 40)
    rnn = expected_tensors(read_block_config(edited(DSPARK_CONFIG, markov_head_type="rnn",
                                                    confidence_head_with_markov=False)))
    assert rnn["markov_head.joint_proj.weight"][0] == (24, 48) and rnn["confidence_head.proj.weight"][0] == (1, 32)
    biased = expected_tensors(read_block_config(edited(DFLASH_CONFIG, attention_bias=True)))
    assert biased["layers.0.self_attn.o_proj.bias"][0] == (32,)


def test_prefixes_and_embedding_codebooks_are_one_spelling():
    assert block_tensor_name("model.layers.0.mlp.up_proj.weight") == "layers.0.mlp.up_proj.weight"
    assert block_tensor_name("candidate_selector.predecessor_codebook.weight") == "candidate_selector.predecessor_codebook"
    prefixed = {f"model.{k}": v for k, v in dflash_shapes().items()}
    assert block_shapes(read_block_config(DFLASH_CONFIG), prefixed).consistent


def test_problems_named():
    cfg = read_block_config(DFLASH_CONFIG)
    shapes = {**dflash_shapes(), "fc.weight": (32, 96), "stray.weight": (3,)}
    del shapes["norm.weight"]
    r = block_shapes(cfg, shapes)
    assert not r.consistent and r.unknown == ("stray.weight",)
    assert r.first_problem("d", cfg).startswith("d: fc.weight is [32, 96], but its config.json needs [32, 64]")
    assert r.missing == (("norm.weight", "hidden_size 32"),)


def test_engine_launch_flags():
    cfg = read_block_config(DSPARK_CONFIG)
    assert block_engine("vllm", "dspark").launch(cfg, "org/spark") == (
        '--speculative-config \'{"method": "dspark", "model": "org/spark", "num_speculative_tokens": 7}\'')
    assert block_engine("sglang", "dspark").launch(cfg) is None
    d = read_block_config(edited(DFLASH_CONFIG, block_size=16))
    assert block_engine("sglang", "dflash").launch(d, "z/d").endswith("--speculative-num-draft-tokens 16")
