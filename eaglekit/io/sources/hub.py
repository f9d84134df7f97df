"""A Hugging Face Hub repo, through huggingface_hub's own URL building, auth headers and HTTP session.

Using the library's session means HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, proxies and its error
classes all behave as users expect; eaglekit only chooses the byte ranges (the library's
``get_safetensors_metadata`` always asks for 100 kB and reads shards one after another).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

from eaglekit.core.errors import AuthError, LocationError, NotFoundError, OfflineError, RateLimitError
from eaglekit.io.sources.base import SMALL_FILE_LIMIT, Chunk, Source
from eaglekit.io.sources.http import range_get, read_capped, retry_hint, transport_errors


@contextmanager
def hub_errors(what: str, *, endpoint: str | None = None) -> Iterator[None]:
    """Translate huggingface_hub's exceptions into eaglekit's, saying what to do. Never shows a token."""
    from huggingface_hub import errors as hf

    where = f" at {endpoint}" if endpoint else ""
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


def hub_json_pages(url: str, *, what: str, endpoint: str, params=None, token: str | bool | None = None
                   ) -> Iterator[Any]:
    """GET a Hub API listing page by page, following ``Link: rel="next"``, through huggingface_hub's session.

    Hand-written rather than huggingface_hub's ``paginate``: that one retries with backoff (about 23 s and
    a dozen log lines against an unreachable endpoint, sleeping Retry-After on 429); here errors surface
    at once, as eaglekit's one-line messages.
    """
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    headers = build_hf_headers(token=token)
    with hub_errors(what, endpoint=endpoint), transport_errors(url):
        next_url: str | None = url
        while next_url:
            response = get_session().get(next_url, params=params, headers=headers)
            hf_raise_for_status(response)
            yield response.json()
            next_url, params = response.links.get("next", {}).get("url"), None


def _status(e: Exception) -> int | None:
    response = getattr(e, "response", None)
    return getattr(response, "status_code", None)


def _check(response) -> None:
    """``hf_raise_for_status`` for a streamed response: read the (small) error body first."""
    from huggingface_hub.utils import hf_raise_for_status

    if response.status_code >= 400:
        response.read()
        hf_raise_for_status(response)


class HubSource(Source):
    kind = "hub"

    def __init__(self, repo_id: str, folder: str = "", *, revision: str | None = None, endpoint: str | None = None,
                 token: str | bool | None = None, display: str | None = None) -> None:
        from huggingface_hub import constants

        super().__init__(display or f"hf://{repo_id}")
        self.repo_id = repo_id
        self.folder = folder.strip("/")
        self.revision = revision or constants.DEFAULT_REVISION
        self.endpoint = (endpoint or constants.ENDPOINT).rstrip("/")
        self._token = token  # None: HF_TOKEN or the stored login; never rendered

    def __repr__(self) -> str:  # no token here, ever
        return f"HubSource({self.display!r}, endpoint={self.endpoint!r})"

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
                             what=self._what(name), check=_check)

    def read_small(self, name: str, limit: int = SMALL_FILE_LIMIT) -> bytes | None:
        from huggingface_hub.utils import get_session

        url, what = self.url(name), self._what(name)
        with hub_errors(what, endpoint=self.endpoint), transport_errors(url), \
                get_session().stream("GET", url, headers=self._headers()) as r:
            if r.status_code == 404 and r.headers.get("x-error-code") == "EntryNotFound":
                return None
            _check(r)
            return read_capped(r, limit, what)

    def list(self) -> list[str]:
        url = f"{self.endpoint}/api/models/{self.repo_id}/tree/{quote(self.revision, safe='')}"
        url += f"/{quote(self.folder)}" if self.folder else ""
        what = f"hf://{self.repo_id}@{self.revision}/{self.folder}"
        prefix = f"{self.folder}/" if self.folder else ""
        entries = [e for page in hub_json_pages(url, what=what, endpoint=self.endpoint, token=self._token) for e in page]
        return sorted(e["path"][len(prefix):] for e in entries if e.get("type") == "file")
