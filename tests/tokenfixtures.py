"""Tokenizer folders for tests/tokens: written by the tokenizers library itself, and a Kimi-style one."""

from __future__ import annotations

import json
from pathlib import Path


def write_tokenizer(folder: Path, *, names: dict[int, str] | None = None, template: str | None = None,
                    eos: str | None = None, vocab: int = 12, special: tuple[str, ...] = ()) -> Path:
    """A WordLevel tokenizer of ``vocab`` tokens (``w0``..), some ids renamed, saved by transformers."""
    from tokenizers import AddedToken, Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    names = names or {}
    tok = Tokenizer(WordLevel({names.get(i, f"w{i}"): i for i in range(vocab)}, unk_token="w0"))
    tok.pre_tokenizer = WhitespaceSplit()
    if special:
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="w0", **({"eos_token": eos} if eos else {}))
    if template is not None:
        fast.chat_template = template
    folder.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(folder))
    return folder


def kimi_folder(folder: Path, ranks: list[bytes], added: dict[int, str], template: str | None = None) -> Path:
    """A Kimi-style tokenizer: tiktoken.model, tokenizer_config.json naming its class in auto_map, and a
    tokenization_kimi.py that, if anything ever ran it, would leave a marker file."""
    import base64

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiktoken.model").write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(ranks)))
    config = {"tokenizer_class": "TikTokenTokenizer", "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
              "bos_token": "[BOS]", "eos_token": "[EOS]",
              "added_tokens_decoder": {str(i): {"content": c, "special": True} for i, c in added.items()}}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    marker = folder / "RAN"
    (folder / "tokenization_kimi.py").write_text(f"open({str(marker)!r}, 'w').write('remote code ran')\n")
    if template is not None:
        (folder / "chat_template.jinja").write_text(template)
    return folder
