"""Run a target model that ``transformers`` loads: its greedy continuation of a prompt, then one forward
pass over prompt + continuation for the aux hidden states and the next-token argmaxes.

Hidden states are indexed as Hugging Face ``output_hidden_states``: index ``i + 1`` is the OUTPUT of
decoder layer ``i``, index ``i`` its INPUT, index ``L`` already final-normed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import resource
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from eaglekit.core.errors import ConfigError, InputError, LocationError, NotFoundError
from eaglekit.core.configs.loadable import check_fits, remote_code
from eaglekit.core.redact import shown
from eaglekit.core.safejson import loads
from eaglekit.core.acceptance.prompts import Prompt
from eaglekit.io.tokens.templates import render_bounded
from eaglekit.core.acceptance.prompts import MAX_FILE_BYTES, parse_prompts
from eaglekit.io.dumps.native import DumpManifest, DumpSample, write_dump
from eaglekit.io.sources.local import LocalSource
from eaglekit.io.tokens.tokenizer import LIMITS as TOKENIZER_LIMITS


@dataclass(frozen=True, eq=False)
class TargetSample:
    """One prompt through the target: ``input_ids`` [T] (prompt + greedy continuation), ``hidden_states``
    [len(layers), T, H], ``target_ids`` [T] (argmax next token after each position), ``prompt_len``, and
    ``logits`` [T, V] when kept (sampling at temperature > 0 needs them)."""

    input_ids: torch.Tensor
    hidden_states: torch.Tensor
    target_ids: torch.Tensor
    prompt_len: int
    logits: torch.Tensor | None = None


class TargetModel:
    """A causal LM loaded by transformers, with its tokenizer (when it has one)."""

    def __init__(self, model, tokenizer, *, name: str, location: Path | None = None, loaded_as: str | None = None) -> None:
        self.model, self.tokenizer, self.name = model, tokenizer, name
        #: the local folder it was loaded from (None for a Hub repo or a model built in memory): the result cache
        #: keys a measurement on it by that folder's content, with ``loaded_as`` (device and dtype)
        self.location, self.loaded_as = location, loaded_as
        cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.num_hidden_layers = int(cfg.num_hidden_layers)
        self.hidden_size = int(cfg.hidden_size)
        self.vocab_size = int(cfg.vocab_size)
        self.max_positions = getattr(cfg, "max_position_embeddings", None)
        template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
        self.chat_template_sha256 = hashlib.sha256(template.encode()).hexdigest() if isinstance(template, str) else None

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def embedding(self) -> torch.Tensor:
        return self.model.get_input_embeddings().weight.detach()

    def tokenize(self, prompt: Prompt, *, source: str = "prompts", rendered: str | None = None) -> list[int]:
        """Token ids of one prompt: as given, tokenized text, or the chat template applied."""
        if prompt.kind == "input_ids":
            ids = list(prompt.value)
        elif self.tokenizer is None:
            raise InputError(f"{source} line {prompt.line}: a {prompt.kind} prompt needs the target's tokenizer, and "
                             f"{self.name} has none; give input_ids.")
        elif prompt.kind == "text":
            ids = list(self.tokenizer(prompt.value, add_special_tokens=True)["input_ids"])
        else:
            text = rendered if rendered is not None else self.render_chats([prompt], source=source)[0]
            ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        if not ids:
            raise InputError(f"{source} line {prompt.line}: the prompt tokenizes to nothing.")
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise InputError(f"{source} line {prompt.line}: token id {bad[0]} is outside {self.name}'s vocabulary "
                             f"(0..{self.vocab_size - 1}).")
        return ids

    def render_chats(self, prompts: Sequence[Prompt], *, source: str = "prompts") -> list[str]:
        """``messages`` prompts rendered with the tokenizer's chat template as ``apply_chat_template`` renders
        them (generation prompt added, special tokens as variables), in the bounded sandbox of
        :mod:`eaglekit.io.tokens.templates`: a template that loops or explodes ends as one line."""
        template = getattr(self.tokenizer, "chat_template", None) if self.tokenizer is not None else None
        if isinstance(template, dict):
            template = template.get("default")
        if not isinstance(template, str) or not template:
            line = prompts[0].line if prompts else 0
            raise InputError(f"{source} line {line}: {self.name}'s tokenizer has no chat template for messages; give "
                             "text or input_ids.")
        return render_bounded(template, [p.value for p in prompts], add_generation_prompt=True,
                              variables=template_variables(self.tokenizer), what=f"{self.name}'s chat template")

    def tokenize_all(self, prompts: Sequence[Prompt], *, source: str, max_new_tokens: int) -> list[list[int]]:
        """Every prompt's ids (:meth:`tokenize`), checked up front to fit the context with
        ``max_new_tokens`` more, so a bad line fails before any prompt runs."""
        chats = [p for p in prompts if p.kind == "messages"]
        rendered = dict(zip((id(p) for p in chats), self.render_chats(chats, source=source))) if chats else {}
        ids_list = [self.tokenize(p, source=source, rendered=rendered.get(id(p))) for p in prompts]
        for p, ids in zip(prompts, ids_list):
            if self.max_positions is not None and len(ids) + max_new_tokens > self.max_positions:
                raise InputError(f"{source} line {p.line}: {len(ids)} prompt tokens + {max_new_tokens} new tokens "
                                 f"exceed {self.name}'s context of {self.max_positions} positions.")
        return ids_list

    def unknown_tokens(self, prompts: Sequence[Prompt], ids_list: Sequence[Sequence[int]]) -> tuple[int, int]:
        """(unknown, total): how many tokens of the text and messages prompts are the tokenizer's unknown
        token (input_ids prompts are taken as given). (0, 0) when the tokenizer has no unknown token."""
        unk = getattr(self.tokenizer, "unk_token_id", None) if self.tokenizer is not None else None
        if unk is None:
            return 0, 0
        texts = [ids for p, ids in zip(prompts, ids_list) if p.kind != "input_ids"]
        return sum(i == unk for ids in texts for i in ids), sum(len(ids) for ids in texts)

    @torch.no_grad()
    def run(self, ids: Sequence[int], *, max_new_tokens: int, layers: Sequence[int], keep_logits: bool = False,
            where: str = "prompt") -> TargetSample:
        """Greedy continuation of ``ids`` (up to ``max_new_tokens``, stopping at EOS), then the features."""
        if self.max_positions is not None and len(ids) + max_new_tokens > self.max_positions:
            raise InputError(f"{where}: {len(ids)} prompt tokens + {max_new_tokens} new tokens exceed "
                             f"{self.name}'s context of {self.max_positions} positions; shorten the prompt or "
                             "lower --max-new-tokens.")
        bad = [k for k in layers if not 0 <= k <= self.num_hidden_layers]
        if bad:
            raise InputError(f"hidden-state index {bad[0]} is outside 0..{self.num_hidden_layers} for "
                             f"{self.name} ({self.num_hidden_layers} layers).")
        x = torch.tensor([list(ids)], dtype=torch.long, device=self.device)
        pad = self.model.generation_config.pad_token_id
        if pad is None:
            pad = self.model.generation_config.eos_token_id
            pad = pad[0] if isinstance(pad, list) else pad
        seq = self.model.generate(x, attention_mask=torch.ones_like(x), do_sample=False,
                                  max_new_tokens=max_new_tokens, pad_token_id=pad if pad is not None else 0,
                                  temperature=None, top_p=None, top_k=None)
        out = self.model(seq, output_hidden_states=True, use_cache=False)
        hs = torch.stack([out.hidden_states[k][0] for k in layers])    # (n, T, H)
        logits = out.logits[0].float()                                  # (T, V)
        return TargetSample(seq[0].cpu(), hs.float().cpu(), logits.argmax(-1).cpu(), len(ids),
                            logits.cpu() if keep_logits else None)


def template_variables(tokenizer) -> dict:
    """What transformers hands a chat template besides the messages: the tokenizer's special tokens
    (``bos_token``, ``eos_token``, ..., ``apply_chat_template``'s ``**self.special_tokens_map``)."""
    tokens = getattr(tokenizer, "special_tokens_map", None) or {}
    return {k: v for k, v in tokens.items()
            if isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))}


def load_target_model(location: str | os.PathLike[str], *, device: str = "cpu", dtype: str = "float32",
                      trust_remote_code: bool = False) -> TargetModel:
    """A causal LM from a local folder or a Hub repo (``org/name`` or ``hf://org/name``, through the normal
    Hugging Face cache).

    Nothing in the folder runs as code unless ``trust_remote_code`` (``--trust-remote-code``): transformers
    always gets it explicitly (with ``None`` it would ask on stdin), and a folder whose config or
    tokenizer_config declares its own classes (``auto_map``) is refused without it. The config's sizes are
    checked against this machine's memory before transformers allocates them (:mod:`eaglekit.core.configs.loadable`);
    weights pickled in ``pytorch_model.bin`` load only as tensors (transformers uses ``torch.load`` with
    ``weights_only=True``), and anything else in them is refused in one line."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    name = shown(location)
    repo = str(location)
    repo = repo[len("hf://"):] if repo.startswith("hf://") else repo
    local = Path(repo).expanduser()
    if str(location).startswith(("/", ".", "~")) and not local.exists():
        raise NotFoundError(f"{name}: no such target model folder.")
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}.get(dtype)
    if torch_dtype is None:
        raise InputError(f"dtype must be float32 or bfloat16, got {dtype!r}.")
    trust = bool(trust_remote_code)
    if local.exists():
        repo = str(local)
        files = _local_json(repo, name)
        remote_code(files, name=name, trust_remote_code=trust)
        config_dict = files["config.json"]
    try:
        config = AutoConfig.from_pretrained(repo, trust_remote_code=trust)
    except Exception as e:  # transformers raises many types for a folder or repo that is not a model
        raise LocationError(f"transformers cannot read the config of the target {name}: {_first_line(e)}") from e
    if not local.exists():
        config_dict = config.to_dict()
        remote_code({"config.json": config_dict}, name=name, trust_remote_code=trust)
    check_fits(config_dict, what=f"{name} config.json", dtype=dtype, available=_memory_available())
    try:
        with quiet_loading():
            model = AutoModelForCausalLM.from_pretrained(repo, trust_remote_code=trust, config=config, dtype=torch_dtype)
    except pickle.UnpicklingError as e:
        raise LocationError(f"{name}: its pytorch_model.bin holds more than tensors and eaglekit loads it only as "
                            f"tensors (torch.load weights_only: {_refused_global(e)}); use a safetensors copy from "
                            "a source you trust.") from e
    except Exception as e:  # transformers raises many types for weights it cannot load
        raise LocationError(f"transformers cannot load the target {name}: {_first_line(e)}") from e
    try:
        tokenizer = AutoTokenizer.from_pretrained(repo, trust_remote_code=trust)
    except (OSError, ValueError, TypeError, KeyError):
        tokenizer = None
    except (RecursionError, MemoryError, Exception) as e:  # tokenizers' own Exception: a file nested or sized past it
        raise LocationError(f"transformers cannot read the tokenizer of the target {name} ({type(e).__name__}: "
                            f"{_first_line(e)[:200]}); check its tokenizer.json.") from e
    model.to(device).eval()
    return TargetModel(model, tokenizer, name=str(location), location=local.resolve() if local.exists() else None,
                       loaded_as=f"{device}:{dtype}:{trust}")


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """transformers' "Loading weights" progress bar off while eaglekit loads or saves a model (it would break
    one-line CLI output and leak into rendered notebooks), and back as it was afterwards."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def _local_json(folder: str, name: str) -> dict[str, object]:
    """config.json (required) and tokenizer_config.json (when present) of a local model folder, read as
    checkpoint files are (regular files inside the folder, size-capped) and parsed with bounds."""
    source = LocalSource(folder)
    out: dict[str, object] = {}
    for file in ("config.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        # bounded before transformers parses them: nesting (64 levels), integer length, size
        data = source.read_small(file, limit=TOKENIZER_LIMITS.get(file, 16 << 20))
        if data is None:
            if file == "config.json":
                raise NotFoundError(f"{name} has no config.json: not a model folder transformers can load.")
            continue
        value = loads(data, what=f"{name}/{file}", error=ConfigError)
        if file in ("config.json", "tokenizer_config.json"):
            out[file] = value
    if not isinstance(out["config.json"], dict):
        raise ConfigError(f"{name}/config.json is not a JSON object.")
    return out


def _memory_available() -> int:
    """Bytes this process may hold: physical memory, or less when an address-space limit is set."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return min(total, soft) if soft != resource.RLIM_INFINITY else total


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _refused_global(e: BaseException) -> str:
    """The line of torch's weights_only refusal that names what was refused."""
    lines = [line.strip() for line in str(e).splitlines() if "GLOBAL" in line or "Unsupported" in line]
    return lines[0] if lines else "refused"


def prompt_records(prompts) -> tuple[tuple[Prompt, ...], str]:
    """The prompts (a JSONL path, read by :func:`read_prompts`, or Prompt records) and how messages name them."""
    if isinstance(prompts, (str, os.PathLike)):
        return read_prompts(prompts)
    plist = tuple(prompts)
    if not all(isinstance(p, Prompt) for p in plist):
        raise InputError("prompts must be a JSONL path or Prompt records (eaglekit.core.acceptance.prompts).")
    return plist, "prompts"


def read_prompts(path: str | os.PathLike[str]) -> tuple[tuple[Prompt, ...], str]:
    """Parse a prompts JSONL file; returns the prompts and the path as messages name it.

    Read as checkpoint files are: a regular file only (a FIFO would block, ``/dev/zero`` never ends),
    its size checked against :data:`~eaglekit.core.acceptance.prompts.MAX_FILE_BYTES` before a byte is read."""
    file = Path(path).expanduser()
    name = shown(file)
    if not file.parent.is_dir():
        raise NotFoundError(f"cannot read the prompts file {name}: no such folder.")
    source = LocalSource(str(file.parent), named=file.name)
    size = source.read(file.name, 0, 0).file_size  # opens and checks the file, reads nothing
    if size > MAX_FILE_BYTES:
        raise InputError(f"the prompts file {name} is {size:,} bytes; eaglekit reads prompts files of at most "
                         f"{MAX_FILE_BYTES:,} bytes (split it).")
    data = source.read(file.name, 0, size).data
    try:
        return parse_prompts(data, source=str(file)), str(file)
    except UnicodeDecodeError as e:
        raise InputError(f"{name} is not UTF-8 text ({e.reason} at byte {e.start}).") from e


def dump_hidden_states(target: str | os.PathLike[str] | TargetModel, prompts: str | os.PathLike[str], out: str | os.PathLike[str], *,
                       layers: Sequence[int] | None = None, max_new_tokens: int = 64, dtype: str = "bfloat16",
                       device: str = "cpu", progress: bool | None = None, trust_remote_code: bool = False):
    """``eaglekit dump-hidden``: run the target on every prompt and write a hidden-state dump folder
    (:mod:`eaglekit.io.dumps.native`). ``layers``: output_hidden_states indices (default: all, 0..L).
    ``trust_remote_code``: see :func:`load_target_model`."""
    from tqdm.auto import tqdm


    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise InputError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}.")
    if dtype not in ("bfloat16", "float32"):
        raise InputError(f"dump dtype must be bfloat16 or float32, got {dtype!r}.")
    plist, psource = read_prompts(prompts)
    tmodel = target if isinstance(target, TargetModel) else load_target_model(
        target, device=device, trust_remote_code=trust_remote_code)
    layers = tuple(range(tmodel.num_hidden_layers + 1)) if layers is None else tuple(sorted(set(layers)))
    bad = [k for k in layers if not 0 <= k <= tmodel.num_hidden_layers]
    if bad:
        raise InputError(f"--layers {bad[0]} is outside 0..{tmodel.num_hidden_layers} (output_hidden_states indices "
                         f"of {tmodel.name}, {tmodel.num_hidden_layers} layers).")
    ids_list = tmodel.tokenize_all(plist, source=psource, max_new_tokens=max_new_tokens)

    def samples():
        for p, ids in tqdm(list(zip(plist, ids_list)), desc="dump-hidden", unit="prompt",
                           disable=None if progress is None else not progress, leave=False):
            s = tmodel.run(ids, max_new_tokens=max_new_tokens, layers=layers, where=f"{psource} line {p.line}")
            yield DumpSample(s.input_ids.numpy(), s.hidden_states.numpy(), s.target_ids.numpy(), s.prompt_len)

    manifest = DumpManifest(target=tmodel.name, hidden_size=tmodel.hidden_size,
                            num_hidden_layers=tmodel.num_hidden_layers, vocab_size=tmodel.vocab_size, layers=layers,
                            samples=len(plist), dtype=dtype,
                            chat_template_sha256=tmodel.chat_template_sha256 if any(p.kind == "messages" for p in plist)
                            else None)
    return write_dump(out, manifest, samples())
