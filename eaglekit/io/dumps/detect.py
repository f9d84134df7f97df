"""Which pipeline wrote a dump folder, and its samples in order, file by file.

:func:`open_training_dump` recognises the layout from what each writer writes: SpecForge's and speculators'
file names, the keys in Model-Optimizer's ``.pt`` samples (a ``.pt`` extension alone says nothing:
speculators leaves a ``token_freq.pt`` beside its data). ``--dump-format`` says it when a folder holds
more than one layout; the files are read one at a time when asked for
(:meth:`TrainingDump.read`), so a 300 GB dump streams through bounded memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import ModuleType

from eaglekit.core.errors import HeaderError, InputError, NotFoundError
from eaglekit.core.redact import shown
from eaglekit.io.dumps import modelopt, specforge, speculators
from eaglekit.io.dumps.files import DumpFolder
from eaglekit.io.dumps.record import DumpRecord, FinalNorm

#: The training-pipeline layouts, by name (the eaglekit format has its own reader, native.py).
READERS: dict[str, ModuleType] = {"specforge": specforge, "speculators": speculators, "modelopt": modelopt}
#: Who prints each name in a message.
WRITERS = {"specforge": "SpecForge prepare_hidden_states", "speculators": "speculators data generation (vLLM)",
           "modelopt": "Model-Optimizer compute_hidden_states_hf"}


@dataclass(frozen=True)
class TrainingDump:
    """A training pipeline's dump folder: its ``format``, where its final hidden state sits
    (``final_norm``), whether it stores loss masks, and its sample files in order."""

    path: str
    format: str
    final_norm: FinalNorm
    files: tuple[str, ...]
    #: the writer's version where a format has more than one (Model-Optimizer: "2025" or "2026")
    version: str = ""

    @property
    def has_loss_mask(self) -> bool:
        return self.format == "specforge" or (self.format == "modelopt" and self.version == "2026")

    @property
    def writer(self) -> str:
        if self.format == "modelopt" and self.version:
            return f"{WRITERS[self.format]}, {modelopt.VERSIONS[self.version]}"
        return WRITERS[self.format]

    def __len__(self) -> int:
        return len(self.files)

    def read(self, index: int) -> DumpRecord:
        """Sample ``index`` (a position in :attr:`files`), read and checked now."""
        return read_sample(self.path, self.format, self.files[index])

    def __str__(self) -> str:
        return f"{shown(self.path)}: {self.format} dump ({self.writer}), {len(self)} samples"


def read_sample(path: str, format: str, name: str) -> DumpRecord:
    """One sample file of a dump folder in ``format``, read through the guards and checked."""
    return READERS[format].read_sample(DumpFolder(path), name)


def detect_format(folder: DumpFolder) -> str:
    """The layout whose writer's files the folder holds: file names for SpecForge and speculators, the saved keys
    for Model-Optimizer (whose samples are named by conversation id). Two layouts at once are refused, with
    the files that point to each."""
    if "manifest.json" in folder.names():
        return "eaglekit"
    found = {f: files for f, mod in READERS.items() if (files := mod.evidence(folder))}
    if not found:
        raise NotFoundError(f"{shown(folder.path)} holds no hidden-state dump files eaglekit recognises (SpecForge "
                            "rows_*/data_*.ckpt, speculators hs_*.safetensors, Model-Optimizer *.pt samples holding "
                            f"{', '.join(modelopt.KEYS)}, or an eaglekit manifest.json); point at the dump's folder.")
    if len(found) > 1:
        which = "; ".join(f"{f} ({WRITERS[f]}): {_some(files)}" for f, files in found.items())
        raise InputError(f"{shown(folder.path)} holds files of more than one dump layout: {shown(which)}. Say which "
                         "with --dump-format, or move one pipeline's files out.")
    return next(iter(found))


def _some(files: list[str], shown_at_most: int = 3) -> str:
    head = ", ".join(files[:shown_at_most])
    return head + (f" and {len(files) - shown_at_most} more" if len(files) > shown_at_most else "")


def open_training_dump(path: str | os.PathLike[str], *, format: str | None = None) -> TrainingDump:
    """Open a SpecForge, speculators or Model-Optimizer dump folder (recognised, or ``format``)."""
    folder = DumpFolder(path)
    fmt = format or detect_format(folder)
    if fmt not in READERS:
        raise InputError(f"dump format must be one of {', '.join(READERS)} here, got {shown(fmt)!r}.")
    reader = READERS[fmt]
    root = folder
    if fmt == "speculators" and "hidden_states" in folder.names() and not any(
            n.startswith("hs_") for n in folder.names()):
        root = DumpFolder(os.path.join(folder.path, "hidden_states"))
    files = reader.list_samples(root)
    if not files:
        raise HeaderError(f"{shown(folder.path)} holds no {fmt} sample files (expected "
                          f"{ {'specforge': 'rows_*/data_*.ckpt', 'speculators': 'hs_*.safetensors', 'modelopt': '*.pt'}[fmt] }); "
                          "is it the dump's folder?")
    version = modelopt.dump_version(root, files) if fmt == "modelopt" else ""
    return TrainingDump(root.path, fmt, reader.FINAL_NORM, tuple(files), version)
