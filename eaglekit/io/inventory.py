"""Inventory: every tensor of a checkpoint across its shards, read from headers alone.

Pure: built from parsed :class:`~eaglekit.core.checkpoint.header.FileHeader` records, renders itself as an HTML table
(last line of a notebook cell) and as an aligned table (terminal), and exports the JSON the CLI prints.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from types import MappingProxyType
from typing import Any

from eaglekit.core.errors import HeaderError
from eaglekit.core.gcpause import paused_gc
from eaglekit.core.checkpoint.header import FileHeader, TENSOR_NAME_T
from eaglekit.core.checkpoint.names import normalize_name
from eaglekit.core.redact import visible
from eaglekit.core.render import Html, format_bytes, html_table, text_table


@dataclass(frozen=True)
class FileEntry:
    """One safetensors file of a checkpoint: its path within the location and header size."""

    path: str
    size: int
    header_bytes: int


@dataclass(frozen=True, slots=True)
class TensorEntry:
    """A tensor and where its bytes lie: ``offset`` is absolute within ``file``."""

    name: TENSOR_NAME_T
    dtype: str
    shape: tuple[int, ...]
    parameters: int
    nbytes: int
    file: str
    offset: int

    @classmethod
    def _trusted(cls, name: str, dtype: str, shape: tuple[int, ...], parameters: int, nbytes: int, file: str,
                 offset: int) -> TensorEntry:
        """A record from a parsed header's fields, without the frozen dataclass's per-field ``__setattr__``."""
        t = cls.__new__(cls)
        _ENTRY_SET[0](t, name)  # the slots' own descriptors: no per-field lookup, no frozen __setattr__
        _ENTRY_SET[1](t, dtype)
        _ENTRY_SET[2](t, shape)
        _ENTRY_SET[3](t, parameters)
        _ENTRY_SET[4](t, nbytes)
        _ENTRY_SET[5](t, file)
        _ENTRY_SET[6](t, offset)
        return t


_ENTRY_SET = tuple(getattr(TensorEntry, f).__set__ for f in
                   ("name", "dtype", "shape", "parameters", "nbytes", "file", "offset"))


@dataclass(frozen=True)
class Inventory:
    """The tensors of a checkpoint (sorted by name), its files, ``__metadata__`` and config.json."""

    source: str
    files: tuple[FileEntry, ...]
    tensors: tuple[TensorEntry, ...]
    metadata: Mapping[str, str] = field(default_factory=dict)
    config: Mapping[str, Any] | None = None
    parameters: int = field(init=False)
    total_bytes: int = field(init=False)
    _by_name: Mapping[str, TensorEntry] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", sum(t.parameters for t in self.tensors))
        object.__setattr__(self, "total_bytes", sum(t.nbytes for t in self.tensors))
        object.__setattr__(self, "_by_name", MappingProxyType({t.name: t for t in self.tensors}))

    @classmethod
    def from_headers(cls, source: str, headers: Sequence[FileHeader], *,
                     config: Mapping[str, Any] | None = None) -> Inventory:
        """Merge the headers of a checkpoint's files; a tensor named in two shards is an error."""
        metadata: dict[str, str] = {}
        entries: list[TensorEntry] = []
        make = TensorEntry._trusted
        with paused_gc():  # 100,000 acyclic records: see eaglekit.core.gcpause
            for h in headers:
                metadata.update(h.metadata)
                file, base = h.filename, h.header_bytes
                entries += [make(t.name, t.dtype, t.shape, t.parameters, t.nbytes, file, base + t.data_offsets[0])
                            for t in h.tensors]
            tensors = {e.name: e for e in entries}
            if len(tensors) != len(entries):  # a name in two shards: say which
                first: dict[str, TensorEntry] = {}
                for e in entries:
                    if e.name in first:
                        raise HeaderError(
                            f"Tensor {e.name!r} appears in both {first[e.name].file} and {e.file} of "
                            f"{source}: a checkpoint must name each tensor once.")
                    first[e.name] = e
            files = tuple(FileEntry(h.filename, h.file_size, h.header_bytes) for h in headers)
            ordered = tuple(map(tensors.__getitem__, sorted(tensors)))
            return cls(source, files, ordered, MappingProxyType(metadata), config)

    # -- lookup -------------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> TensorEntry:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"{name!r} is not a tensor of {self.source}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[TensorEntry]:
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tensors)

    # -- export -------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The object ``eaglekit inspect --json`` prints."""
        return {
            "source": self.source,
            "files": [{"path": f.path, "size": f.size, "header_bytes": f.header_bytes} for f in self.files],
            "tensors": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "nbytes": t.nbytes,
                         "file": t.file} for t in self.tensors],
            "parameters": self.parameters,
            "total_bytes": self.total_bytes,
            "metadata": dict(self.metadata),
        }

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame([{"name": t.name, "dtype": t.dtype, "shape": list(t.shape),
                              "parameters": t.parameters, "nbytes": t.nbytes, "file": t.file}
                             for t in self.tensors])

    # -- rendering ----------------------------------------------------------------------------------
    def _rows(self) -> list[list[str]]:
        many = len(self.files) > 1
        return [[t.name, t.dtype, "[" + ", ".join(map(str, t.shape)) + "]", f"{t.parameters:,}",
                 format_bytes(t.nbytes)] + ([t.file] if many else []) for t in self.tensors]

    def _headers(self) -> list[str]:
        return ["tensor", "dtype", "shape", "parameters", "bytes"] + (["file"] if len(self.files) > 1 else [])

    def summary(self) -> str:
        files = f"{len(self.files)} file" + ("s" if len(self.files) != 1 else "")
        header = sum(f.header_bytes for f in self.files)
        return (f"{self.source}: {len(self.tensors)} tensors, {self.parameters:,} parameters, "
                f"{format_bytes(self.total_bytes)} in {files} (headers read: {format_bytes(header)})")

    def __str__(self) -> str:  # names and metadata come from the file: controls shown, never obeyed
        lines = [visible(self.summary(), newlines=False)]
        if self.metadata:
            lines.append(visible("metadata: " + ", ".join(f"{k}={v}" for k, v in sorted(self.metadata.items())),
                                 newlines=False))
        rows = [[visible(c, newlines=False) if isinstance(c, str) else c for c in row] for row in self._rows()]
        lines.append(text_table(self._headers(), rows, align=self._align()))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        caption = escape(self.summary())
        if self.metadata:
            caption += "<br>metadata: " + escape(", ".join(f"{k}={v}" for k, v in sorted(self.metadata.items())))
        return html_table(self._headers(), self._rows(), caption=Html(caption), align=self._align())

    def _align(self) -> list[str]:
        return ["left", "left", "left", "right", "right"] + (["left"] if len(self.files) > 1 else [])


#: The last column of :func:`compare_inventories`: headers compare dtype and shape, never values.
SAME_SHAPE = "same dtype & shape (values not compared)"


def compare_inventories(inventories: Mapping[str, Inventory]):
    """A pandas table: one row per (normalised) tensor, one column per checkpoint, "DTYPE [shape]" cells.

    Rows whose cells differ across checkpoints are listed first; missing tensors show as "-". Headers hold
    no values, so the last column compares dtype and shape only, and says so in its name: equal shapes do
    not mean equal values (two drafters' d2t maps can share a shape and differ almost everywhere; compare
    values with :func:`eaglekit.analysis.compat.pair` or :func:`eaglekit.similarity`).
    """
    import pandas as pd

    cells: dict[str, dict[str, str]] = {}
    for label, inv in inventories.items():
        for t in inv.tensors:
            cells.setdefault(normalize_name(t.name), {})[label] = f"{t.dtype} [{', '.join(map(str, t.shape))}]"
    frame = pd.DataFrame.from_dict(cells, orient="index").reindex(columns=list(inventories)).fillna("-")
    frame[SAME_SHAPE] = frame.nunique(axis=1) == 1
    frame = frame.sort_values([SAME_SHAPE], kind="stable").rename_axis("tensor")
    return frame
