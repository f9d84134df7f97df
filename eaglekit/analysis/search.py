"""Find EAGLE-3 and block drafters (DFlash, DFlash2, DSpark) on the Hub by what their configs say, and rank them
for a target model.

Block drafters count by their config too (:func:`eaglekit.core.configs.block.block_family`: the architectures
``DFlashDraftModel``, ``DFlash2DraftModel``, ``Qwen3DSparkModel``/``DSparkDraftModel``, or a ``dflash_config``); a
row then says its family and block size, and against a target it fits when its hidden size is the target's,
its ``target_layer_ids`` lie inside the target's layers and its ``mask_token_id`` inside its vocabulary.

Drafters are named every which way (``EAGLE3-*``, ``*-eagle3``, ``*.eagle3``, ``*_eagle3``, or nothing
drafter-like at all) and their ``base_model`` metadata sometimes names another drafter (docs/domain.md,
"Finding drafters on the Hub"). So a repo counts as a drafter only when its config.json says EAGLE-3
(:func:`eaglekit.core.configs.config.is_eagle3_config`: architectures or ``speculators_model_type``), never by name.

How: one Hub listing (``/api/models`` with the config, tags, safetensors, downloads, likes and
lastModified fields expanded, every page followed), then config.json of each *candidate*, read in
parallel. The listing's ``config`` is the Hub's summary (architectures, model_type), so candidates
are the repos whose summary names an EAGLE-3 architecture, whose id or model_type mentions eagle or
speculator, or that carry an eagle3/speculators/speculative-decoding tag; each is confirmed or
excluded by its full config. A drafter saved under a plain architecture name whose repo shows none
of these is not found.

The listing is paged here through huggingface_hub's own session, headers and ``ModelInfo`` rather
than ``HfApi.list_models``, whose backoff retries a refused connection for 23 s and sleeps through a
429 five times: here both become an immediate error that says what happened.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from html import escape as _esc
from typing import Any, Literal

from eaglekit.core.configs.config import (EAGLE3_ARCHITECTURES, TargetConfig, is_eagle3_config, load_config_bytes, normalize_config,
                     target_fit)
from eaglekit.core.errors import ConfigError, InputError, LocationError, OfflineError, RateLimitError
from eaglekit.core.redact import redact_text
from eaglekit.core.render import Html, html_colour, html_table, html_tint, text_table
from eaglekit.io.sources.hub import check_endpoint, hub_json_pages, HubSource
from eaglekit.core.configs.block import BLOCK_ARCHITECTURES, BlockDrafterConfig, block_family, read_block_config
from eaglekit.core.configs.config import normalize_target
from eaglekit.io.reader import load_config

TargetSource = Literal["declared", "card", "name"]
#: The listing's fields find_drafters asks the Hub to expand.
EXPAND = ("config", "tags", "safetensors", "downloads", "likes", "lastModified", "cardData")
_HINTS = ("eagle", "speculator", "dflash", "dspark")
_DRAFTER_TAG = re.compile(r"eagle-?[123]?|speculators?|speculative-decoding|dflash2?|dspark", re.I)
_NAME_PREFIX = re.compile(r"^(?:sglang[-_.])?eagle-?3[-_.]", re.I)
_NAME_SUFFIX = re.compile(r"[-_.](?:speculators?[-_.])?eagle-?3(?:[-_.].*)?$", re.I)
_CONFIG_LIMIT = 4 * 1024 * 1024


@dataclass(frozen=True)
class DrafterHit:
    """One repo whose config.json says EAGLE-3, or a candidate whose config could not be read
    (``problem`` says why; the config fields are then None and ``format`` is "unknown").

    ``target`` is the verifier a speculators config declares (``target_source`` "declared"), else a
    guess from the model card's base_model ("card") or the repo name ("name"): unreliable.
    ``hidden_size`` is the drafter's; ``target_hidden_size`` is what its fc layer expects.
    """

    repo: str
    format: str
    architecture: str | None = None
    target: str | None = None
    target_source: TargetSource | None = None
    hidden_size: int | None = None
    target_hidden_size: int | None = None
    vocab_size: int | None = None
    draft_vocab_size: int | None = None
    aux_layer_ids: tuple[int, ...] | None = None
    parameters: int | None = None
    downloads: int = 0
    likes: int = 0
    updated: str | None = None  # YYYY-MM-DD
    base_model: str | None = None  # as the model card says it; not trusted
    fits_target: bool | None = None  # None: no target given, or the config is unreadable
    why: str | None = None  # why it does not fit the target
    problem: str | None = None  # why the config could not be read
    #: "EAGLE-3", or a block drafter's family ("DFlash", "DFlash2", "DSpark"); for those, ``aux_layer_ids`` holds
    #: its target_layer_ids (layer outputs) and ``block_size`` / ``mask_token_id`` are set
    family: str = "EAGLE-3"
    block_size: int | None = None
    mask_token_id: int | None = None
    num_target_layers: int | None = None

    @property
    def is_block(self) -> bool:
        return self.family != "EAGLE-3"

    @property
    def location(self) -> str:
        """``hf://OWNER/REPO``: hand it to read_inventory, compat or similarity as it is."""
        return f"hf://{self.repo}"

    @property
    def target_label(self) -> str | None:
        if self.target is None or self.target_source == "declared":
            return self.target
        return f"{self.target} (inferred from {self.target_source})"

    def to_json(self) -> dict[str, Any]:
        """The row as ``eaglekit search --json`` prints it (issue 6's schema)."""
        return {"repo": self.repo, "format": self.format, "family": self.family, "block_size": self.block_size,
                "target": self.target_label,
                "hidden_size": self.hidden_size, "draft_vocab_size": self.draft_vocab_size,
                "vocab_size": self.vocab_size,
                "aux_layer_ids": list(self.aux_layer_ids) if self.aux_layer_ids is not None else None,
                "parameters": self.parameters, "downloads": self.downloads, "likes": self.likes,
                "fits_target": self.fits_target, "why": self.problem or self.why}


@dataclass(frozen=True)
class SearchResults:
    """What :func:`find_drafters` found: drafters best first, and the look-alikes it excluded.

    ``scanned`` counts the repos the Hub listed; ``excluded`` holds (repo, reason) for candidates
    whose config.json is readable but not EAGLE-3.
    """

    hits: tuple[DrafterHit, ...]
    scanned: int
    excluded: tuple[tuple[str, str], ...] = ()
    query: str | None = None
    author: str | None = None
    target: str | None = None
    target_config: TargetConfig | None = None

    def __repr__(self) -> str:
        return f"<SearchResults: {self._caption()}>"

    def __len__(self) -> int:
        return len(self.hits)

    def __iter__(self) -> Iterator[DrafterHit]:
        return iter(self.hits)

    def __getitem__(self, key: int | str) -> DrafterHit:
        """A row by position, or by repo id (``"owner/name"`` or ``"hf://owner/name"``)."""
        if isinstance(key, int):
            return self.hits[key]
        repo = key.removeprefix("hf://")
        for hit in self.hits:
            if hit.repo == repo:
                return hit
        raise KeyError(f"{key!r} is not among the {len(self.hits)} drafters found.")

    def with_target(self, target: Any, *, endpoint: str | None = None, timeout: float | None = None, token: str | bool | None = None,
                    label: str | None = None) -> SearchResults:
        """The same drafters judged against ``target`` and re-ranked, fitting first: no new search."""
        config = load_target_config(target, endpoint=endpoint, timeout=timeout, token=token)
        hits = sorted((_fit(replace(h, fits_target=None, why=None), config) for h in self.hits), key=_rank)
        return replace(self, hits=tuple(hits), target=label or _target_label(target), target_config=config)

    @property
    def fitting(self) -> tuple[DrafterHit, ...]:
        """The drafters whose hidden size and vocab fit the target (empty without a target)."""
        return tuple(h for h in self.hits if h.fits_target)

    def to_json(self) -> dict[str, Any]:
        return {"drafters": [h.to_json() for h in self.hits]}

    def to_pandas(self):
        """One row per drafter, every field plus ``location``."""
        import pandas as pd

        columns = list(DrafterHit.__dataclass_fields__)
        rows = [{**{c: getattr(h, c) for c in columns}, "target": h.target_label, "location": h.location}
                for h in self.hits]
        frame = pd.DataFrame(rows, columns=[*columns, "location"])
        ints = ["hidden_size", "target_hidden_size", "vocab_size", "draft_vocab_size", "parameters"]
        return frame.astype({**{c: "Int64" for c in ints}, "fits_target": "boolean"})

    # -- rendering -------------------------------------------------------------------------------

    def _caption(self) -> str:
        scope = " ".join(filter(None, [f"matching {self.query!r}" if self.query else None,
                                       f"by {self.author}" if self.author else None]))
        unread = sum(h.problem is not None for h in self.hits)
        blocks = [h for h in self.hits if h.is_block]
        found = _plural(len(self.hits) - unread - len(blocks), "EAGLE-3 drafter")
        if blocks:
            kinds = ", ".join(f"{k} {sum(h.family == k for h in blocks)}" for k in ("DFlash", "DFlash2", "DSpark")
                              if any(h.family == k for h in blocks))
            found += f" and {_plural(len(blocks), 'block drafter')} ({kinds})"
        text = (f"{found} among {_plural(self.scanned, 'Hub model')}"
                f"{' ' + scope if scope else ''}; {_plural(len(self.excluded), 'look-alike')} excluded by config")
        if unread:
            text += f"; {_plural(unread, 'candidate')} with no readable config"
        if self.target_config is not None:
            t = self.target_config
            text += (f"; {len(self.fitting)} fit target {self.target} "
                     f"(hidden {t.hidden_size}, vocab {t.vocab_size})")
        return text

    def _rows(self) -> tuple[list[str], list[list[Any]]]:
        headers = ["repo", "format", "target", "hidden", "vocab", "draft vocab", "aux ids", "params (M)",
                   "downloads", "likes", "updated"]
        blocks = self._blocks
        if blocks:  # the family and block size, after the format (only when a block drafter is among the rows)
            headers[2:2] = ["family", "block"]
        with_target = self.target_config is not None
        headers += ["fits", "why"] if with_target else ["why"]
        rows = []
        for h in self.hits:
            row = [h.repo, h.format, h.target_label or "", h.hidden_size or "", h.vocab_size or "",
                   h.draft_vocab_size or "", _aux(h),
                   f"{h.parameters / 1e6:.2f}" if h.parameters is not None else "", f"{h.downloads:,}",
                   f"{h.likes:,}", h.updated or ""]
            if blocks:
                row[2:2] = [h.family if h.problem is None else "", h.block_size or ""]
            fits = "" if h.fits_target is None else ("yes" if h.fits_target else "no")
            rows.append(row + ([fits] if with_target else []) + [h.problem or h.why or ""])
        return headers, rows

    @property
    def _blocks(self) -> bool:
        return any(h.is_block for h in self.hits)

    def _align(self, headers: list[str]) -> list[str]:
        lead = 5 if self._blocks else 3
        return ["left"] * lead + ["right"] * 8 + ["left"] * (len(headers) - lead - 8)

    def __str__(self) -> str:
        headers, rows = self._rows()
        text = text_table(headers, rows, align=self._align(headers), title=self._caption())
        if self.excluded:
            text += "\nexcluded: " + "; ".join(f"{repo} ({why})" for repo, why in self.excluded)
        return text

    def _repr_html_(self) -> str:
        headers, rows = self._rows()
        tcol = headers.index("target")
        for h, row in zip(self.hits, rows):
            if h.target is not None and h.target_source != "declared":
                row[tcol] = Html(f'{_esc(h.target)} <span style="color:{html_colour("grey")};font-size:0.85em">'
                              f"inferred from {h.target_source}</span>")
            for i in (0, tcol, len(row) - 1):  # repo, target, why: the text columns, which wrap (see _fit_width)
                text = row[i] if isinstance(row[i], Html) else _esc(str(row[i]))
                row[i] = Html(f'<span style="{_WRAP}">{text}</span>')
        styles = [f"background:{html_tint('yellow')}" if h.problem else
                  f"background:{html_tint('green')}" if h.fits_target else None for h in self.hits]
        table = html_table(headers, rows, row_styles=styles, align=self._align(headers), classes=["eaglekit-search"],
                           caption=self._caption() + " (click a column to sort)")
        table = table.replace('<th style="', f'<th onclick="{_esc(_SORT_JS)}" style="cursor:pointer;')
        table = _fit_width(table)
        if self.excluded:
            items = "".join(f"<li><code>{_esc(repo)}</code>: {_esc(why)}</li>" for repo, why in self.excluded)
            table += f"<details><summary>excluded by config ({len(self.excluded)})</summary><ul>{items}</ul></details>"
        return table


#: The text columns (repo, target, why) wrap, breaking long repo ids anywhere if they must.
_WRAP = "white-space:normal;overflow-wrap:anywhere"


def _fit_width(table: str) -> str:
    """Let the table size to its container instead of pushing the last columns into a scroll area: numbers
    and short columns stay on one line, headers break between words, and the text columns wrap (their
    cells carry :data:`_WRAP`). Inline styles, so JupyterLab's and the report's table CSS do not override
    them."""
    table = table.replace('style="border-collapse:collapse;font-size:0.9em"',
                          'style="border-collapse:collapse;font-size:0.85em;width:100%;max-width:100%;table-layout:auto"',
                          1)
    table = table.replace('<th style="cursor:pointer;text-align:', '<th style="cursor:pointer;white-space:normal;'
                                                                   'overflow-wrap:normal;text-align:')
    table = table.replace(";padding:2px 8px;vertical-align:top;", ";padding:2px 4px;vertical-align:top;white-space:nowrap;")
    return table.replace('<caption style="', '<caption style="white-space:normal;', 1)


#: Sorts the table's body by the clicked column, numbers numerically; no network, no library.
_SORT_JS = ("var t=this.closest('table'),b=t.tBodies[0],i=this.cellIndex,"
            "d=this.dataset.dir=this.dataset.dir==='a'?'d':'a',"
            "k=function(r){var s=r.cells[i].textContent.replace(/,/g,''),n=parseFloat(s);"
            "return isNaN(n)||!/^[-\\d.]/.test(s)?s:n};"
            "Array.from(b.rows).sort(function(x,y){var p=k(x),q=k(y),c=(typeof p===typeof q)?"
            "(p<q?-1:p>q?1:0):(typeof p==='number'?-1:1);return d==='a'?c:-c})"
            ".forEach(function(r){b.appendChild(r)})")


def _aux(hit: DrafterHit) -> str:
    if hit.aux_layer_ids is None:
        return "" if hit.problem else "default"  # the config leaves them to the engine
    return ",".join(map(str, hit.aux_layer_ids))


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def find_drafters(query: str | None = None, *, target: Any = None, author: str | None = None, limit: int = 1000,
                  endpoint: str | None = None, timeout: float | None = None, token: str | bool | None = None, workers: int = 8) -> SearchResults:
    """Search the Hub for EAGLE-3 drafters; with ``target``, mark and rank the ones that fit it.

    ``query``: text the repo id must contain (the Hub's search); None lists every model, most
    downloaded first. ``limit``: how many listed models to examine (pages are followed until then).
    ``target``: the target model's config, as a file or folder path, a location (``hf://...``,
    ``https://...``, ``ssh://...``), a Hub repo id (``owner/name``), a dict or a TargetConfig.
    ``endpoint``/``token``: default HF_ENDPOINT and HF_TOKEN (or the stored login).

    Raises OfflineError (HF_HUB_OFFLINE), LocationError (endpoint unreachable), AuthError (401/403),
    RateLimitError (429, with the server's retry time). A candidate whose config.json is missing,
    broken or gated becomes a row with ``problem`` set, not an error.
    """
    from huggingface_hub import constants

    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InputError(f"limit must be a positive integer (how many Hub models to examine), got {limit!r}.")

    endpoint = check_endpoint(endpoint or constants.ENDPOINT)
    # read the target first: a bad one fails before the listing
    target_config = load_target_config(target, endpoint=endpoint, timeout=timeout, token=token) if target is not None else None
    models = _list_models(endpoint, token, query=query, author=author, limit=limit, timeout=timeout)
    candidates = [m for m in models if _is_candidate(m)]
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(candidates)))) as pool:
        fetched = list(pool.map(lambda m: _fetch_config(m.id, endpoint, token, timeout), candidates))
    hits, excluded = [], []
    for model, (data, problem) in zip(candidates, fetched):
        hit = _summarise(model, data, problem)
        (excluded if isinstance(hit, tuple) else hits).append(hit)
    drafter_ids = {h.repo for h in hits}
    hits = sorted((_guess_target(h, drafter_ids) for h in hits), key=_rank)
    results = SearchResults(tuple(hits), len(models), tuple(excluded), query=query, author=author)
    return results if target_config is None else results.with_target(target_config, label=_target_label(target))


def _rank(hit: DrafterHit) -> tuple:
    """Readable configs first, then fitting ones (when judged), then the most downloaded."""
    return (hit.problem is not None, hit.fits_target is False, -hit.downloads, hit.repo)


def _target_label(target: Any) -> str | None:
    if target is None or isinstance(target, (str, os.PathLike)):
        return None if target is None else redact_text(os.fspath(target))  # never a password or signature
    return target.source if isinstance(target, TargetConfig) else "the target config"


def load_target_config(target: Any, *, endpoint: str | None = None, timeout: float | None = None, token: str | bool | None = None) -> TargetConfig:
    """The target model's config (see :func:`find_drafters`), read and normalised (text_config aware)."""

    if isinstance(target, TargetConfig):
        return target
    if isinstance(target, Mapping):
        return normalize_target(target, source="the target config")
    if not isinstance(target, (str, os.PathLike)):
        raise InputError(f"target must be a path, a location, a Hub repo id or a config dict, got {type(target).__name__}.")
    text = os.fspath(target)
    if re.fullmatch(r"[\w.-]+/[\w.-]+", text) and not os.path.exists(text):
        text = f"hf://{text}"
    shown = redact_text(text)
    raw = load_config(text, kind="target", endpoint=endpoint, timeout=timeout, token=token,
                      label=f"Target {redact_text(os.fspath(target))!r}")
    return normalize_target(raw, source=shown if shown.endswith(".json") else f"{shown.rstrip('/')}/config.json")


def _list_models(endpoint: str, token: str | bool | None, *, query: str | None, author: str | None,
                 limit: int, timeout: float | None = None) -> list:
    """Page through ``/api/models`` (Link headers) until ``limit`` models; no retries, no sleeping."""

    params: list[tuple[str, str]] = [*([("search", query)] if query else []),
                                     *([("author", author)] if author else []),
                                     ("sort", "downloads"), ("limit", str(limit)),
                                     *(("expand", field) for field in EXPAND)]
    models: list = []
    what = f"Hub search at {redact_text(endpoint)}"
    for page in hub_json_pages(f"{endpoint}/api/models", what=what, endpoint=endpoint, timeout=timeout, params=params, token=token):
        models.extend(_model_info(item, what) for item in page)
        if len(models) >= limit:
            break
    return models[:limit]


def _model_info(item: Any, what: str):
    """One listing entry as huggingface_hub's ModelInfo; a malformed one is a LocationError."""
    from huggingface_hub.hf_api import ModelInfo

    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        raise LocationError(f"{what}: the listing holds an entry that is not a model with an id "
                            f"({type(item).__name__}); is the endpoint a Hugging Face Hub?")
    try:
        return ModelInfo(**{"siblings": None, **item})
    except Exception as e:  # field types the client cannot read (its parser trusts the Hub)
        raise LocationError(f"{what}: cannot read the listing entry for {item['id'][:200]!r} "
                            f"({type(e).__name__}); is the endpoint a Hugging Face Hub?") from e


def _is_candidate(model) -> bool:
    """Worth reading config.json for (module doc); tags match whole: "eaglekit-demo" is no hint."""
    summary = model.config if isinstance(model.config, dict) else {}
    archs = summary.get("architectures") if isinstance(summary.get("architectures"), list) else []
    if any(a in EAGLE3_ARCHITECTURES or a in BLOCK_ARCHITECTURES for a in archs):
        return True
    words = f"{model.id} {summary.get('model_type') or ''}".lower()
    return any(hint in words for hint in _HINTS) or any(_DRAFTER_TAG.fullmatch(t) for t in model.tags or ())


def _fetch_config(repo: str, endpoint: str, token: str | bool | None,
                  timeout: float | None = None) -> tuple[bytes | None, str | None]:
    """(config.json bytes or None when absent, None) or (None, why it could not be read)."""

    try:
        return HubSource(repo, endpoint=endpoint, timeout=timeout, token=token).read_small("config.json", _CONFIG_LIMIT), None
    except (OfflineError, RateLimitError):  # concerns the whole search, not this candidate
        raise
    except LocationError as e:  # gone since the listing, gated, private, too large, malformed id, stalled
        return None, f"config.json not readable: {e}"


def _summarise(model, data: bytes | None, problem: str | None) -> DrafterHit | tuple[str, str]:
    """A row for a candidate, or (repo, reason) when its config says it is not an EAGLE-3 drafter."""
    base = (model.card_data.to_dict() if model.card_data is not None else {}).get("base_model")
    base = base[0] if isinstance(base, list) and base else base
    st = model.safetensors
    stats = dict(downloads=model.downloads or 0, likes=model.likes or 0,
                 updated=model.last_modified.date().isoformat() if model.last_modified else None,
                 parameters=st.total if st is not None else None, base_model=base if isinstance(base, str) else None)
    source = f"hf://{model.id}/config.json"
    if problem is None and data is None:
        problem = "no config.json in the repo, so nothing says it is an EAGLE-3 drafter"
    if problem is None:
        try:
            raw = load_config_bytes(data, source=source, kind="any")
            if block_family(raw) is not None:
                return _block_hit(model.id, read_block_config(raw, source=source), stats)
            if not is_eagle3_config(raw):
                return model.id, _not_eagle3(raw)
            cfg = normalize_config(raw, source=source)
        except ConfigError as e:
            problem = str(e)
    if problem is not None:
        return DrafterHit(model.id, "unknown", problem=problem, **stats)
    return DrafterHit(model.id, cfg.format, architecture=cfg.architecture, target=cfg.declared_target,
                      target_source="declared" if cfg.declared_target else None, hidden_size=cfg.hidden_size,
                      target_hidden_size=cfg.target_hidden_size, vocab_size=cfg.vocab_size,
                      draft_vocab_size=cfg.draft_vocab_size, aux_layer_ids=cfg.aux_layer_ids, **stats)


def _block_hit(repo: str, cfg: BlockDrafterConfig, stats: dict[str, Any]) -> DrafterHit:
    """A row for a block drafter: its family's name as format, target_layer_ids as the aux ids (layer outputs)."""
    return DrafterHit(repo, cfg.family, architecture=cfg.architecture, hidden_size=cfg.hidden_size,
                      target_hidden_size=cfg.target_hidden_size, vocab_size=cfg.vocab_size,
                      aux_layer_ids=cfg.target_layer_ids, family=cfg.family_name, block_size=cfg.block_size,
                      mask_token_id=cfg.mask_token_id, num_target_layers=cfg.num_target_layers, **stats)


def _not_eagle3(raw: Mapping[str, Any]) -> str:
    said = ", ".join(f"{k} {raw[k]!r}" for k in ("architectures", "model_type", "speculators_model_type") if k in raw)
    return f"config.json has {said or 'no architectures'}: not an EAGLE-3 drafter"


def target_from_name(repo: str) -> str | None:
    """The target a drafter's repo name suggests (``sglang-EAGLE3-Llama-3.1-8B-Instruct`` ->
    ``Llama-3.1-8B-Instruct``, ``Qwen3-8B-speculator.eagle3`` -> ``Qwen3-8B``), or None. A guess."""
    name = repo.rsplit("/", 1)[-1]
    stripped = _NAME_SUFFIX.sub("", _NAME_PREFIX.sub("", name))
    return stripped if stripped and stripped != name else None


def _guess_target(hit: DrafterHit, drafters: set[str]) -> DrafterHit:
    """Declared targets stand; else the card's base_model unless it names a drafter; else the name."""
    if hit.target_source == "declared":
        return hit
    base = hit.base_model
    if base and base not in drafters and not any(w in base.lower() for w in _HINTS):
        return replace(hit, target=base, target_source="card")
    guess = target_from_name(hit.repo)
    return replace(hit, target=guess, target_source="name" if guess else None)


def _fit(hit: DrafterHit, target: TargetConfig) -> DrafterHit:
    """Whether the drafter's fc input (target_hidden_size) and vocabulary match the target model."""
    if hit.problem is not None:
        return hit
    if hit.is_block:
        return _fit_block(hit, target)
    misfits = [f"{field.split()[0]} {value} != target {want}"
               for field, value, want in target_fit(hit.target_hidden_size, hit.vocab_size, target) if value != want]
    return replace(hit, fits_target=not misfits, why="; ".join(misfits) or None)


def _fit_block(hit: DrafterHit, target: TargetConfig) -> DrafterHit:
    """A block drafter fits when its hidden size is the target's (it uses the target's embedding and lm_head), fc
    reads states of that width, its layer ids (layer outputs) lie inside the target and its mask token inside the
    target's vocabulary."""
    misfits = []
    if hit.hidden_size != target.hidden_size:
        misfits.append(f"hidden {hit.hidden_size} != target {target.hidden_size}")
    elif hit.target_hidden_size != target.hidden_size:
        misfits.append(f"fc reads {hit.target_hidden_size}-wide states, target {target.hidden_size}")
    if hit.vocab_size is not None and hit.vocab_size != target.vocab_size:
        misfits.append(f"vocab {hit.vocab_size} != target {target.vocab_size}")
    if hit.mask_token_id is not None and hit.mask_token_id >= target.vocab_size:
        misfits.append(f"mask_token_id {hit.mask_token_id} outside the target's {target.vocab_size} tokens")
    if hit.aux_layer_ids and max(hit.aux_layer_ids) >= target.num_hidden_layers:
        misfits.append(f"target_layer_ids {list(hit.aux_layer_ids)} past the target's {target.num_hidden_layers} "
                       "layers")
    return replace(hit, fits_target=not misfits, why="; ".join(misfits) or None)
