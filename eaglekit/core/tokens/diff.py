"""Two targets' tokenizers side by side: vocabulary, special and added tokens, chat templates.

Pure: two :class:`~eaglekit.core.tokens.tokenizer_files.TokenizerFiles` in, a :class:`TokenizerDiff` out.
A drafter's draft vocabulary (d2t) and its training data are token ids of ONE tokenizer: a changed id,
a changed special token or a changed chat template moves what the drafter sees at serving time without
changing a single tensor shape (docs/tokens.md). Vocabularies of different sizes are not versions of one
tokenizer: :func:`diff_tokenizers` refuses them with one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from eaglekit.core.errors import VocabMapError
from eaglekit.core.redact import visible
from eaglekit.core.render import kv_html, kv_text
from eaglekit.core.tokens.textdiff import unified_lines
from eaglekit.core.tokens.tokenizer_files import TokenizerFiles

EXIT_SAME, EXIT_DIFFERENT = 0, 4
#: Ids listed by name in a difference (all are counted).
SHOWN_IDS = 20
#: Template diff lines kept (all are counted).
SHOWN_LINES = 200


@dataclass(frozen=True)
class TokenChange:
    id: int
    a: str | None
    b: str | None

    def __str__(self) -> str:
        return f"id {self.id}: {_tok(self.a)} -> {_tok(self.b)}"


@dataclass(frozen=True)
class TokenizerDiff:
    """Everything that differs between tokenizer A and B; ``same`` when nothing does."""

    a: str
    b: str
    vocab_size: int
    vocab_equal: bool
    vocab_sha256: tuple[str, str]
    changed_ids: tuple[TokenChange, ...]
    changed_count: int
    special: dict[str, tuple[str | None, str | None]]
    added_only_a: tuple[TokenChange, ...]
    added_only_b: tuple[TokenChange, ...]
    special_flag_changed: tuple[int, ...]
    templates: dict[str, tuple[str | None, str | None]]
    template_diff: dict[str, tuple[str, ...]]
    remote_code: tuple[str | None, str | None]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def same(self) -> bool:
        return (self.vocab_equal and not self.special and not self.added_only_a and not self.added_only_b
                and not self.special_flag_changed and not self.template_diff)

    @property
    def exit_code(self) -> int:
        return EXIT_SAME if self.same else EXIT_DIFFERENT

    @property
    def differences(self) -> tuple[str, ...]:
        """One line per difference, each naming what changed (the tokens, the template lines)."""
        out = []
        if not self.vocab_equal:
            shown = ", ".join(str(c) for c in self.changed_ids[:SHOWN_IDS])
            more = f" (+{self.changed_count - SHOWN_IDS} more)" if self.changed_count > SHOWN_IDS else ""
            out.append(f"vocabulary: {self.changed_count} of {self.vocab_size:,} ids hold other tokens: {shown}{more}")
        for key, (x, y) in self.special.items():
            out.append(f"{key}: {_tok(x)} -> {_tok(y)}")
        if self.added_only_a:
            out.append("added tokens only in A: " + ", ".join(f"{c.id} {_tok(c.a)}" for c in self.added_only_a[:SHOWN_IDS]))
        if self.added_only_b:
            out.append("added tokens only in B: " + ", ".join(f"{c.id} {_tok(c.b)}" for c in self.added_only_b[:SHOWN_IDS]))
        if self.special_flag_changed:
            out.append("special flag changed on ids " + ", ".join(map(str, self.special_flag_changed[:SHOWN_IDS])))
        for name, lines in self.template_diff.items():
            changed = [ln for ln in lines if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
            what = {(True, False): "only in A", (False, True): "only in B"}.get(
                (self.templates[name][0] is not None, self.templates[name][1] is not None), "differs")
            out.append(f"chat template {name!r} {what}: {len(changed)} lines changed: "
                       + " | ".join(visible(ln, newlines=False)[:120] for ln in changed[:6])
                       + (" | ..." if len(changed) > 6 else ""))
        return tuple(out)

    @property
    def summary(self) -> str:
        if self.same:
            return f"tokenizers and chat templates are the same ({self.vocab_size:,} tokens)"
        return f"tokenizers differ in {len(self.differences)} ways"

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "same": self.same, "vocab_size": self.vocab_size,
                "vocab_equal": self.vocab_equal, "vocab_sha256": list(self.vocab_sha256),
                "changed_ids": [{"id": c.id, "a": c.a, "b": c.b} for c in self.changed_ids],
                "changed_count": self.changed_count,
                "special_tokens": {k: {"a": x, "b": y} for k, (x, y) in self.special.items()},
                "added_only_a": [{"id": c.id, "content": c.a} for c in self.added_only_a],
                "added_only_b": [{"id": c.id, "content": c.b} for c in self.added_only_b],
                "special_flag_changed": list(self.special_flag_changed),
                "chat_template_diff": {k: list(v) for k, v in self.template_diff.items()},
                "remote_code": {"a": self.remote_code[0], "b": self.remote_code[1]},
                "differences": list(self.differences), "notes": list(self.notes)}

    def _pairs(self) -> list[tuple[str, Any]]:
        pairs: list[tuple[str, Any]] = [("A", visible(self.a, newlines=False)), ("B", visible(self.b, newlines=False)), ("vocabulary", f"{self.vocab_size:,} tokens, "
                                        + ("equal" if self.vocab_equal else f"{self.changed_count} ids differ")),
                                        ("vocab sha256", f"{self.vocab_sha256[0][:16]} / {self.vocab_sha256[1][:16]}")]
        pairs += [("difference", visible(d, newlines=False)) for d in self.differences]
        pairs += [("note", visible(n, newlines=False)) for n in self.notes]
        return pairs

    def __str__(self) -> str:
        text = kv_text(self._pairs(), title=self.summary)
        for name, lines in self.template_diff.items():
            text += f"\n\nchat template {name!r}:\n" + "\n".join(visible(ln, newlines=False) for ln in lines)
        return text

    def _repr_html_(self) -> str:
        parts = [kv_html(self._pairs(), caption=self.summary)]
        for name, lines in self.template_diff.items():
            body = "\n".join(f"<span style='color:{_colour(ln)}'>{escape(visible(ln, newlines=False))}</span>"
                             for ln in lines)
            parts.append(f"<p>chat template <code>{escape(name)}</code></p><pre>{body}</pre>")
        return "<div>" + "".join(parts) + "</div>"


def _colour(line: str) -> str:
    return "#b00" if line.startswith("-") else "#070" if line.startswith("+") else "inherit"


def _tok(token: str | None) -> str:
    return "(none)" if token is None else visible(repr(token), newlines=False)


def diff_tokenizers(a: TokenizerFiles, b: TokenizerFiles) -> TokenizerDiff:
    """Compare two tokenizers; raises :class:`VocabMapError` when their vocabularies differ in size."""
    notes = list(a.notes) + list(b.notes)
    if a.vocab and b.vocab and len(a.vocab) != len(b.vocab):
        raise VocabMapError(f"the tokenizers hold vocabularies of different sizes ({len(a.vocab):,} tokens in {a.source}, "
                            f"{len(b.vocab):,} in {b.source}): they are different tokenizers, not versions of one, and "
                            "no drafter's token ids carry over between them.")
    if not a.vocab or not b.vocab:
        if a.files.get("tokenizer.model") and a.files.get("tokenizer.model") == b.files.get("tokenizer.model"):
            notes.append("vocabulary compared by the hash of tokenizer.model (binary): equal")
        elif a.vocab or b.vocab or a.kind == "binary-model" or b.kind == "binary-model":
            notes.append("one side has no readable vocabulary: vocabulary compared by file hash only")
    ids = sorted(set(a.vocab) | set(b.vocab))
    changed = [TokenChange(i, a.vocab.get(i), b.vocab.get(i)) for i in ids if a.vocab.get(i) != b.vocab.get(i)]
    hashes = (a.vocab_sha256, b.vocab_sha256)
    if not a.vocab or not b.vocab:
        eq = _file_hash(a) == _file_hash(b)
        changed = [] if eq else changed
    else:
        eq = hashes[0] == hashes[1]
    special = {k: (a.special.get(k), b.special.get(k)) for k in sorted(set(a.special) | set(b.special))
               if a.special.get(k) != b.special.get(k)}
    added_a = {t.id: t for t in a.added}
    added_b = {t.id: t for t in b.added}
    only_a = tuple(TokenChange(i, added_a[i].content, None) for i in sorted(set(added_a) - set(added_b)))
    only_b = tuple(TokenChange(i, None, added_b[i].content) for i in sorted(set(added_b) - set(added_a)))
    flag = tuple(i for i in sorted(set(added_a) & set(added_b)) if added_a[i].special != added_b[i].special)
    names = sorted(set(a.templates) | set(b.templates))
    templates = {n: (a.templates.get(n), b.templates.get(n)) for n in names}
    tdiff = {n: _template_lines(x, y, n) for n, (x, y) in templates.items() if x != y}
    if a.remote_code or b.remote_code:
        notes.append("tokenizer code named by auto_map was not run (" + ", ".join(
            f"{s}: {r}" for s, r in (("A", a.remote_code), ("B", b.remote_code)) if r) + "); the files were compared")
    return TokenizerDiff(a=a.source, b=b.source, vocab_size=max(len(a.vocab), len(b.vocab)), vocab_equal=eq,
                         vocab_sha256=hashes, changed_ids=tuple(changed[:SHOWN_IDS * 50]), changed_count=len(changed),
                         special=special, added_only_a=only_a, added_only_b=only_b, special_flag_changed=flag,
                         templates=templates, template_diff=tdiff, remote_code=(a.remote_code, b.remote_code),
                         notes=tuple(notes))


def _file_hash(t: TokenizerFiles) -> str | None:
    for name in ("tokenizer.json", "tiktoken.model", "tokenizer.model"):
        if name in t.files:
            return t.files[name]
    return None


def _template_lines(x: str | None, y: str | None, name: str) -> tuple[str, ...]:
    # bounded: cut to SHOWN_LINES as the diff is produced, never built whole first (core.tokens.textdiff)
    return unified_lines(x or "", y or "", fromfile=f"A {name}", tofile=f"B {name}", limit=SHOWN_LINES)
