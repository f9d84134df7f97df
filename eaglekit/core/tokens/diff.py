"""Two targets' tokenizers side by side: vocabulary, special and added tokens, chat templates.

Pure: two :class:`~eaglekit.core.tokens.tokenizer_files.TokenizerFiles` in, a :class:`TokenizerDiff` out.
A drafter's draft vocabulary (d2t) and its training data are token ids of ONE tokenizer: a changed id,
a changed special token or a changed chat template moves what the drafter sees at serving time without
changing a single tensor shape (docs/tokens.md). A new version that appends ids (``<think>``, ``</think>``)
is diffed like any other: the appended ids, every changed old id, how many old ids keep their token, and
what that means for a drafter's d2t/t2d and embedding rows (:attr:`TokenizerDiff.drafter_impact`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

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
    #: How many ids each side's files name (a grown vocabulary: B's is larger).
    vocab_sizes: tuple[int, int] = (0, 0)
    #: Each side's config.json ``vocab_size`` (None where not read): what engines size t2d and the embedding by.
    config_vocab_sizes: tuple[int | None, int | None] = (None, None)
    #: Ids only B names (a new version's appended tokens) and ids only A names (dropped in B).
    appended: tuple[TokenChange, ...] = ()
    dropped: tuple[TokenChange, ...] = ()
    #: Ids both name that hold the same token in both (they keep their meaning).
    kept_count: int = 0

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
        if not self.vocab_equal and self.changed_count:
            shown = ", ".join(str(c) for c in self.changed_ids[:SHOWN_IDS])
            more = f" (+{self.changed_count - SHOWN_IDS} more)" if self.changed_count > SHOWN_IDS else ""
            out.append(f"vocabulary: {self.changed_count} of {self.kept_count + self.changed_count:,} ids hold other "
                       f"tokens: {shown}{more}")
        for ids, verb in ((self.appended, "appends"), (self.dropped, "drops")):
            if ids:
                toks = ", ".join(f"{c.id} {_tok(c.b if verb == 'appends' else c.a)}" for c in ids[:SHOWN_IDS])
                more = f" (+{len(ids) - SHOWN_IDS} more)" if len(ids) > SHOWN_IDS else ""
                out.append(f"vocabulary: B {verb} {_count(len(ids), 'id')} ({_span(ids)}): {toks}{more}")
        if not self.vocab_equal and not (self.changed_count or self.appended or self.dropped):
            out.append("vocabulary: the files differ (compared by their hash: one side has no readable vocabulary)")
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
        return f"tokenizers differ in {_count(len(self.differences), 'way')}"

    @property
    def drafter_impact(self) -> tuple[str, ...]:
        """What the vocabulary's difference means for a drafter trained on A's ids: its d2t (draft id ->
        target id offsets), its t2d (one flag per target id) and the embedding rows; the last entry says the
        same for a full-vocabulary drafter, which has no d2t/t2d (its lm_head row i drafts id i)."""
        if self.vocab_equal or not (self.vocab_sizes[0] and self.vocab_sizes[1]):
            return ()
        na, nb = self.vocab_sizes
        out = []
        moved = self.changed_count + len(self.dropped)
        kept = f"{self.kept_count:,} of A's {na:,} ids keep their token in B"
        if not moved:
            out.append(f"{kept}: every old id keeps its meaning, so a drafter's d2t (draft id -> target id offsets) "
                       "still holds")
        else:
            out.append(f"{kept}; {_count(moved, 'id')} changed or dropped: a d2t entry that lands on one of them drafts "
                       "another token now (check the drafter's map: eaglekit check DRAFTER --target B)")
        if self.appended:
            n = len(self.appended)
            out.append(self._t2d_line(n))
            ca, cb = self.config_vocab_sizes
            if ca is not None and ca == cb:
                out.append(f"the targets' embeddings keep their {cb:,} rows (config.json's vocab_size): the rows of "
                           f"{_span(self.appended)} were padding in A and carry the new tokens in B; a drafter that saves "
                           "embed_tokens needs B's rows there, its lm_head over the draft vocabulary is unchanged")
            else:
                out.append(f"a target whose embedding grew with the vocabulary has {_count(n, 'row')} appended "
                           f"({_span(self.appended)}) and the old rows where they were; a drafter that saves embed_tokens "
                           f"needs the same {_count(n, 'row')} appended (B's), its lm_head over the draft vocabulary is "
                           "unchanged")
        if self.dropped:
            out.append(f"t2d shrinks from {na:,} to {nb:,} entries: cut it; a d2t offset landing on "
                       f"{_span(self.dropped)} points past B's vocabulary")
        # A full-vocabulary drafter (draft_vocab_size = vocab_size) has no d2t/t2d: lm_head row i drafts id i.
        full = []
        if moved:
            full.append(f"its lm_head rows for the {_count(moved, 'changed or dropped id')} draft other tokens now")
        ca, cb = self.config_vocab_sizes
        if self.appended and ca is not None and ca == cb:
            full.append(f"its lm_head keeps its {cb:,} rows (config.json's vocab_size): those of "
                        f"{_span(self.appended)} were padding in A, so it drafts the new ids only once trained on them")
        elif self.appended:
            full.append(f"it needs {_count(len(self.appended), 'lm_head row')} appended and vocab_size / "
                        f"draft_vocab_size raised from {na:,} to {nb:,}, or the new ids cannot be drafted")
        if self.dropped:
            full.append(f"its lm_head and vocab_size / draft_vocab_size shrink from {na:,} to {nb:,}")
        if not full:
            full.append("every lm_head row keeps its token")
        out.append("a full-vocabulary drafter (no d2t/t2d: lm_head row i drafts id i): " + "; ".join(full))
        return tuple(out)

    def _t2d_line(self, n: int) -> str:
        """What t2d needs for ``n`` appended ids. Engines size t2d by the target config's ``vocab_size`` (SGLang's
        and vLLM's EAGLE-3 heads index it by target id up to the embedding's rows), which is often padded past the
        ids the tokenizer names: read it, not the tokenizer's count."""
        ca, cb = self.config_vocab_sizes
        false = (f"the {_count(n, 'appended id')} False (not in the draft vocabulary: the drafter never proposes "
                 "them, the target still may)")
        if ca is not None and cb is not None:
            if ca == cb:
                return (f"t2d has one entry per target id up to config.json's vocab_size, {cb:,} on both: it keeps its "
                        f"size (the appended ids fall inside the padded vocabulary); mark {false}")
            return f"t2d has one entry per target id up to config.json's vocab_size: grow it from {ca:,} to {cb:,}, {false}"
        if cb is not None:
            return (f"t2d has one entry per target id up to B's config.json vocab_size, {cb:,} (A's config was not "
                    f"read): size it so, {false}")
        na, nb = self.vocab_sizes
        return (f"t2d has one entry per target id: engines size it by the target config's vocab_size (not read here: "
                f"give the model folders with their config.json); by the tokenizers' counts, from {na:,} to {nb:,}, "
                f"{false}")

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "same": self.same, "vocab_size": self.vocab_size,
                "config_vocab_sizes": list(self.config_vocab_sizes),
                "vocab_equal": self.vocab_equal, "vocab_sha256": list(self.vocab_sha256),
                "changed_ids": [{"id": c.id, "a": c.a, "b": c.b} for c in self.changed_ids],
                "changed_count": self.changed_count,
                "special_tokens": {k: {"a": x, "b": y} for k, (x, y) in self.special.items()},
                "added_only_a": [{"id": c.id, "content": c.a} for c in self.added_only_a],
                "added_only_b": [{"id": c.id, "content": c.b} for c in self.added_only_b],
                "special_flag_changed": list(self.special_flag_changed),
                "chat_template_diff": {k: list(v) for k, v in self.template_diff.items()},
                "remote_code": {"a": self.remote_code[0], "b": self.remote_code[1]},
                "vocab_sizes": list(self.vocab_sizes), "kept_count": self.kept_count,
                "appended": [{"id": c.id, "content": c.b} for c in self.appended],
                "dropped": [{"id": c.id, "content": c.a} for c in self.dropped],
                "drafter_impact": list(self.drafter_impact),
                "differences": list(self.differences), "notes": list(self.notes)}

    def _pairs(self) -> list[tuple[str, Any]]:
        pairs: list[tuple[str, Any]] = [("A", visible(_cut(self.a, 400), newlines=False)),
                                        ("B", visible(_cut(self.b, 400), newlines=False)), ("vocabulary", self._vocab_line()),
                                        ("vocab sha256", f"{self.vocab_sha256[0][:16]} / {self.vocab_sha256[1][:16]}")]
        pairs += [("difference", visible(d, newlines=False)) for d in self.differences]
        pairs += [("drafter", visible(d, newlines=False)) for d in self.drafter_impact]
        pairs += [("note", visible(n, newlines=False)) for n in self.notes]
        return pairs

    def _vocab_line(self) -> str:
        na, nb = self.vocab_sizes
        size = f"{self.vocab_size:,} tokens" if na == nb else f"{na:,} -> {nb:,} tokens"
        if self.vocab_equal:
            return f"{size}, equal"
        grown = "".join(f", {_count(len(ids), 'id')} {verb}" for ids, verb in ((self.appended, "appended"),
                                                                               (self.dropped, "dropped")) if ids)
        return f"{size}, {self.changed_count:,} ids differ{grown}"

    def __str__(self) -> str:
        text = kv_text(self._pairs(), title=self.summary)
        for name, lines in self.template_diff.items():
            text += f"\n\nchat template {name!r}:\n" + "\n".join(visible(_cut(ln, 1000), newlines=False) for ln in lines)
        return text

    def _repr_html_(self) -> str:
        parts = [kv_html(self._pairs(), caption=self.summary)]
        for name, lines in self.template_diff.items():
            body = "\n".join(f"<span style='color:{_colour(ln)}'>{escape(visible(_cut(ln, 1000), newlines=False))}</span>"
                             for ln in lines)
            parts.append(f"<p>chat template <code>{escape(name)}</code></p><pre>{body}</pre>")
        return "<div>" + "".join(parts) + "</div>"


def _colour(line: str) -> str:
    return "#b00" if line.startswith("-") else "#070" if line.startswith("+") else "inherit"


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def _span(ids: tuple[TokenChange, ...]) -> str:
    lo, hi = ids[0].id, ids[-1].id
    return f"id {lo}" if lo == hi else f"ids {lo}-{hi}"


#: Characters of one token (or template line) the text and HTML reports show; the JSON carries it whole.
SHOWN_CHARS = 120


def _cut(text: str, most: int = SHOWN_CHARS) -> str:
    return text if len(text) <= most else f"{text[:most]}... ({len(text):,} characters)"


def _tok(token: str | None) -> str:
    if token is None:
        return "(none)"
    if len(token) > SHOWN_CHARS:   # a 1 MB special token is one short line, not 2 MB of report
        return visible(repr(token[:SHOWN_CHARS]), newlines=False) + f"... ({len(token):,} characters)"
    return visible(repr(token), newlines=False)


def diff_tokenizers(a: TokenizerFiles, b: TokenizerFiles) -> TokenizerDiff:
    """Compare two tokenizers, of the same size or not (a new version appends ids)."""
    notes = list(a.notes) + list(b.notes)
    if not a.vocab or not b.vocab:
        if a.files.get("tokenizer.model") and a.files.get("tokenizer.model") == b.files.get("tokenizer.model"):
            notes.append("vocabulary compared by the hash of tokenizer.model (binary): equal")
        elif a.vocab or b.vocab or a.kind == "binary-model" or b.kind == "binary-model":
            notes.append("one side has no readable vocabulary: vocabulary compared by file hash only")
    both = sorted(set(a.vocab) & set(b.vocab))
    changed = [TokenChange(i, a.vocab[i], b.vocab[i]) for i in both if a.vocab[i] != b.vocab[i]]
    appended = dropped = ()
    if a.vocab and b.vocab:
        appended = tuple(TokenChange(i, None, b.vocab[i]) for i in sorted(set(b.vocab) - set(a.vocab)))
        dropped = tuple(TokenChange(i, a.vocab[i], None) for i in sorted(set(a.vocab) - set(b.vocab)))
        if both and len(changed) * 2 > len(both):
            notes.append(f"{len(changed):,} of the {len(both):,} ids both name hold other tokens: these look like "
                         "different tokenizers rather than versions of one, and no drafter's token ids carry over")
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
                         notes=tuple(notes), vocab_sizes=(len(a.vocab), len(b.vocab)), appended=appended,
                         dropped=dropped, kept_count=len(both) - len(changed),
                         config_vocab_sizes=(a.model_vocab_size, b.model_vocab_size))


def _file_hash(t: TokenizerFiles) -> str | None:
    for name in ("tokenizer.json", "tiktoken.model", "tokenizer.model"):
        if name in t.files:
            return t.files[name]
    return None


def _template_lines(x: str | None, y: str | None, name: str) -> tuple[str, ...]:
    # bounded: cut to SHOWN_LINES as the diff is produced, never built whole first (core.tokens.textdiff)
    return unified_lines(x or "", y or "", fromfile=f"A {name}", tofile=f"B {name}", limit=SHOWN_LINES)
