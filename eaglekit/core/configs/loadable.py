"""What loading a target with transformers would do, decided from its config before transformers sees it.

Two things a model folder can make ``from_pretrained`` do that eaglekit refuses up front:

* **run the folder's own Python.** A config or tokenizer_config with ``auto_map`` names classes in
  ``.py`` files beside it (transformers ``dynamic_module_utils``). With ``trust_remote_code=None``
  transformers asks on stdin whether to run them (``resolve_trust_remote_code``), so an answer of "y"
  piped in runs them. eaglekit always passes ``trust_remote_code`` explicitly (False unless the user
  gave ``--trust-remote-code``), and a folder that declares its own code without that flag is refused
  by :func:`remote_code` with one line, rather than silently loaded with transformers' built-in class.
* **allocate more memory than the machine has.** transformers allocates every weight from the config's
  sizes before reading a byte (``intermediate_size`` 5e7 or ``hidden_size`` 1e9 take hundreds of GB):
  :func:`check_fits` compares a parameter count (:func:`parameter_count`, an upper estimate of a
  decoder-only transformer) with the memory available.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eaglekit.core.errors import ConfigError, InputError

#: Config keys whose value is a size; a missing one counts as 0 (or 1 for counts that multiply).
_SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "moe_intermediate_size",
          "n_routed_experts", "num_local_experts", "num_experts", "head_dim", "num_attention_heads",
          "num_key_value_heads")
#: Bytes per parameter for the dtypes eaglekit loads a target in.
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def remote_code(files: Mapping[str, Any], *, name: str, trust_remote_code: bool) -> None:
    """Refuse (InputError) when one of ``files`` (file name -> parsed JSON) declares its own Python
    (``auto_map``) and the user did not pass ``--trust-remote-code``."""
    if trust_remote_code:
        return
    declaring = [f for f, value in files.items() if isinstance(value, Mapping) and value.get("auto_map")]
    if declaring:
        raise InputError(f"{name} ships its own Python code (auto_map in {', '.join(declaring)}); eaglekit does not "
                         "run it unless you pass --trust-remote-code (read the code first).")


def parameter_count(config: Mapping[str, Any], *, what: str) -> int:
    """An upper estimate of the parameters a decoder-only transformer of ``config`` holds: embedding and
    lm_head, and per layer the attention projections and a gated MLP (every expert, for a MoE). Sizes
    nested under ``text_config`` (multimodal wrappers) count too."""
    inner = config.get("text_config")
    if isinstance(inner, Mapping):
        config = {**config, **inner}
    size = {k: _size(config, k, what) for k in _SIZES}
    hidden, layers = size["hidden_size"], size["num_hidden_layers"]
    heads = max(size["num_attention_heads"], 1)
    head_dim = size["head_dim"] or hidden // heads
    kv = size["num_key_value_heads"] or heads
    attention = hidden * head_dim * (2 * heads + 2 * kv)                  # q, o; k, v
    experts = max(size["n_routed_experts"], size["num_local_experts"], size["num_experts"], 1)
    mlp = 3 * hidden * max(size["intermediate_size"], size["moe_intermediate_size"]) * experts
    tied = config.get("tie_word_embeddings") is True
    return size["vocab_size"] * hidden * (1 if tied else 2) + layers * (attention + mlp)


def check_fits(config: Mapping[str, Any], *, what: str, dtype: str, available: int) -> int:
    """The bytes ``config``'s weights take in ``dtype``; ConfigError when that exceeds ``available``."""
    need = parameter_count(config, what=what) * DTYPE_BYTES.get(dtype, 4)
    if need > available:
        raise ConfigError(f"{what} describes a model of about {_gib(need)} in {dtype} (hidden_size "
                          f"{config.get('hidden_size')}, intermediate_size {config.get('intermediate_size')}, "
                          f"{config.get('num_hidden_layers')} layers), more than the {_gib(available)} this machine "
                          "can give; refusing to load it.")
    return need


def _size(config: Mapping[str, Any], key: str, what: str) -> int:
    value = config.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{what}: {key} must be a non-negative integer, got {str(value)[:40]!r}.")
    return value


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"
