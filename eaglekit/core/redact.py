"""Credentials never shown: the one place that strips them from URLs before a message or a page shows one."""

from __future__ import annotations

import re
from urllib.parse import urlsplit


def redact_url(url: str) -> str:
    """The URL for messages and display: no ``user:password@`` part and no query string (a pre-signed
    URL's query is its credential). Never show credentials."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return re.sub(r"//[^/@]*@", "//", url.split("?")[0])
    if not (parts.username or parts.password or parts.query):
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2], query="").geturl()
