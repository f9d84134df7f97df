"""A Hugging Face Hub repo, through huggingface_hub's own URL building, auth headers and HTTP session.

Using the library's session means HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, proxies and its error
classes all behave as users expect; eaglekit only chooses the byte ranges (the library's
``get_safetensors_metadata`` always asks for 100 kB and reads shards one after another).

The Hub is not trusted either: every request has the total deadline of :mod:`.http` (the library's
session gets deadline-aware connections: :func:`~eaglekit.io.sources.http.guard_client`, inert outside
eaglekit's requests), error bodies and listing pages are capped, listings are bounded and checked for
shape, and the token never follows a link to another host.

Large ranges (similarity, drift and export blocks) take ``range_get``'s socket path
(:mod:`eaglekit.io.sources.fast_range`): the request built by the library's session (its headers and
request hooks: offline mode, request id), sent on the source's own keep-alive sockets, the body received
straight into the caller's buffer; error answers still go through the session and ``hf_raise_for_status``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote, urljoin, urlsplit

from eaglekit.core.errors import AuthError, LocationError, NotFoundError, OfflineError, RateLimitError
from eaglekit.core.redact import redact_url
from eaglekit.core.safejson import loads
from eaglekit.io.sources.base import SMALL_FILE_LIMIT, Chunk, Source
from eaglekit.io.sources.fast_range import FastRanges
from eaglekit.io.sources.http import (Deadline, check_timeout, guard_client, range_get, read_capped, read_error_body, retry_hint,
                                      transport_errors)
from eaglekit.io.location import check_hub_path, check_repo_id

#: A listing page (search results, a repo tree) is refused beyond this size, like config.json.
PAGE_LIMIT = SMALL_FILE_LIMIT
#: Pages followed through ``Link: rel="next"`` at most (a 1000-entry page each on the Hub).
MAX_PAGES = 200
#: Entries of a repo tree listing at most; a drafter repo holds a handful of files.
MAX_TREE_ENTRIES = 100_000


def check_endpoint(endpoint: str) -> str:
    """A Hub endpoint URL without its trailing slash, or LocationError saying what is wrong with it."""
    try:
        parts = urlsplit(endpoint)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError as e:
        raise LocationError(f"Malformed Hub endpoint {redact_url(endpoint)!r}: {e}. Expected "
                            "http(s)://HOST[:PORT].") from e
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LocationError(f"Malformed Hub endpoint {redact_url(endpoint)!r}: expected http(s)://HOST[:PORT].")
    return endpoint.rstrip("/")


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port or {"http": 80, "https": 443}.get(parts.scheme)


@contextmanager
def hub_errors(what: str, *, endpoint: str | None = None) -> Iterator[None]:
    """Translate huggingface_hub's exceptions into eaglekit's, saying what to do. Never shows a token."""
    from huggingface_hub import errors as hf

    where = f" at {redact_url(endpoint)}" if endpoint else ""
    try:
        yield
    except hf.OfflineModeIsEnabled as e:
        raise OfflineError(f"{what}: offline mode is on (HF_HUB_OFFLINE is set), so the Hub cannot be reached. "
                           "Unset HF_HUB_OFFLINE, or use a local copy of the files.") from e
    except hf.GatedRepoError as e:
        raise AuthError(f"{what}: the repo is gated (HTTP {_status(e)}). Accept its terms on the Hub, then set "
                        "HF_TOKEN (or pass token=) to a token of the account that has access.") from e
    except hf.RevisionNotFoundError as e:
        raise NotFoundError(f"{what}: revision not found{where}. Check the @REVISION part of the location.") from e
    except hf.RemoteEntryNotFoundError as e:
        raise NotFoundError(f"{what}: file not found in the repo{where}.") from e
    except hf.RepositoryNotFoundError as e:
        raise NotFoundError(f"{what}: repo not found{where} (or it is private: set HF_TOKEN to a token with "
                            "access).") from e
    except hf.HfHubHTTPError as e:
        status = _status(e)
        headers = e.response.headers if e.response is not None else {}
        if status in (401, 403):
            raise AuthError(f"{what}: access refused (HTTP {status}). Check that HF_TOKEN (or token=) is valid "
                            "and has access to this repo.") from e
        if status == 429:
            raise RateLimitError(f"{what}: the Hub is rate limiting requests (HTTP 429){retry_hint(headers)}.") from e
        raise LocationError(f"{what}: the Hub answered HTTP {status}{where}.") from e


def hub_json_pages(url: str, *, what: str, endpoint: str, params=None, token: str | bool | None = None,
                   max_pages: int = MAX_PAGES, timeout: float | None = None) -> Iterator[list]:
    """GET a Hub API listing page by page, following ``Link: rel="next"``, through huggingface_hub's session.

    Hand-written rather than huggingface_hub's ``paginate``: that one retries with backoff (about 23 s and
    a dozen log lines against an unreachable endpoint, sleeping Retry-After on 429); here errors surface
    at once, as eaglekit's one-line messages. Against a hostile server: each page has the request
    deadline and is refused over :data:`PAGE_LIMIT` bytes or when it is not a JSON list; at most
    ``max_pages`` pages are followed, an empty page or a next URL seen before ends the listing, and the
    token is sent only to the endpoint's own host (a next link elsewhere is followed without it).
    """
    from huggingface_hub.utils import build_hf_headers, get_session

    home = _origin(endpoint)
    seen: set[str] = set()
    with hub_errors(what, endpoint=endpoint), transport_errors(url):
        next_url: str | None = url
        while next_url and len(seen) < max_pages:
            seen.add(next_url)
            headers = build_hf_headers(token=token if _origin(next_url) == home else False)
            deadline = Deadline(what, timeout)
            with transport_errors(next_url, deadline), deadline, guard_client(get_session()).stream(
                    "GET", next_url, params=params, headers=headers, timeout=deadline.left()) as response:
                _check(response, deadline)
                page = loads(read_capped(response, PAGE_LIMIT, f"{what}: a listing page", deadline),
                             what=f"{what}: a listing page", error=LocationError)
                link = response.links.get("next", {}).get("url")
            if not isinstance(page, list):
                raise LocationError(f"{what}: the Hub answered a JSON {type(page).__name__} where a list of "
                                    "entries was expected; is the endpoint a Hugging Face Hub?")
            yield page
            next_url, params = (urljoin(next_url, link) if link and page else None), None
            if next_url in seen:
                break


def _status(e: Exception) -> int | None:
    response = getattr(e, "response", None)
    return getattr(response, "status_code", None)


def _check(response, deadline: Deadline | None = None) -> None:
    """``hf_raise_for_status`` for a streamed response: read (at most 64 KiB of) the error body first."""
    from huggingface_hub.utils import hf_raise_for_status

    if response.status_code >= 400:
        read_error_body(response, deadline)
        hf_raise_for_status(response)


class HubSource(Source):
    kind = "hub"

    def __init__(self, repo_id: str, folder: str = "", *, revision: str | None = None, endpoint: str | None = None,
                 timeout: float | None = None, token: str | bool | None = None, display: str | None = None) -> None:
        """``timeout``: total seconds per request (default: ``EAGLEKIT_TIMEOUT`` or 60, read at each request)."""
        from huggingface_hub import constants

        super().__init__(display or f"hf://{repo_id}")
        self.repo_id = check_repo_id(repo_id)
        self.folder = check_hub_path(folder.strip("/"), "path", repo_id)
        self.revision = check_hub_path(revision or constants.DEFAULT_REVISION, "revision", repo_id)
        self.endpoint = check_endpoint(endpoint or constants.ENDPOINT)
        self._token = token  # None: HF_TOKEN or the stored login; never rendered
        self.timeout = None if timeout is None else check_timeout(timeout)
        self._fast = FastRanges()  # sockets for large ranges (range_get's socket path), beside the session

    def __repr__(self) -> str:  # no token here, ever
        return f"HubSource({self.display!r}, endpoint={redact_url(self.endpoint)!r})"

    def path_in_repo(self, name: str) -> str:
        return f"{self.folder}/{name}" if self.folder else name

    def url(self, name: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo_id, self.path_in_repo(name), revision=self.revision, endpoint=self.endpoint)

    def _headers(self) -> dict[str, str]:
        from huggingface_hub.utils import build_hf_headers

        return build_hf_headers(token=self._token)

    def _what(self, name: str) -> str:
        return f"hf://{self.repo_id}@{self.revision}/{self.path_in_repo(name)}"

    def read(self, name: str, start: int, length: int) -> Chunk:
        from huggingface_hub.utils import get_session

        with hub_errors(self._what(name), endpoint=self.endpoint):
            return range_get(get_session(), self.url(name), start, length, headers=self._headers(),
                             what=self._what(name), check=_check, deadline=Deadline(self._what(name), self.timeout),
                             fast=self._fast)

    def read_into(self, name: str, start: int, buffer: bytearray | memoryview) -> int:
        from huggingface_hub.utils import get_session

        with hub_errors(self._what(name), endpoint=self.endpoint):
            return len(range_get(get_session(), self.url(name), start, len(buffer), headers=self._headers(),
                                 what=self._what(name), check=_check, into=buffer,
                                 deadline=Deadline(self._what(name), self.timeout),
                                 fast=self._fast).data)

    def read_small(self, name: str, limit: int = SMALL_FILE_LIMIT) -> bytes | None:
        from huggingface_hub.utils import get_session

        url, what = self.url(name), self._what(name)
        deadline = Deadline(what, self.timeout)
        with hub_errors(what, endpoint=self.endpoint), transport_errors(url, deadline), deadline, \
                guard_client(get_session()).stream("GET", url, headers=self._headers(), timeout=deadline.left()) as r:
            if r.status_code == 404 and r.headers.get("x-error-code") == "EntryNotFound":
                read_error_body(r, deadline)  # drained (at most 64 KiB): the connection goes back to the pool
                return None
            _check(r, deadline)
            return read_capped(r, limit, what, deadline)

    def close(self) -> None:
        self._fast.close()

    def list(self) -> list[str]:
        url = f"{self.endpoint}/api/models/{self.repo_id}/tree/{quote(self.revision, safe='')}"
        url += f"/{quote(self.folder)}" if self.folder else ""
        what = f"hf://{self.repo_id}@{self.revision}/{self.folder}"
        prefix = f"{self.folder}/" if self.folder else ""
        names: list[str] = []
        for page in hub_json_pages(url, what=what, endpoint=self.endpoint, token=self._token, timeout=self.timeout):
            for entry in page:
                if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
                    raise LocationError(f"{what}: the Hub's file listing holds an entry without a path "
                                        f"({type(entry).__name__}); is the endpoint a Hugging Face Hub?")
                if entry.get("type") == "file" and entry["path"].startswith(prefix):
                    names.append(entry["path"][len(prefix):])
            if len(names) > MAX_TREE_ENTRIES:
                raise LocationError(f"{what}: the Hub lists more than {MAX_TREE_ENTRIES:,} files here; "
                                    "name the checkpoint file or its index in the location instead.")
        return sorted(names)
