"""What may be shown: the one place that strips credentials from URLs and makes control characters
visible before a message, a table or a page shows text that came from outside.

Credentials are a URL's ``user:password@`` part and its query string (a pre-signed URL's ``?sig=`` is
its credential). Control characters (ESC, BEL, CR, ... in tensor names, metadata, shard names or a
server's error text) would otherwise move the cursor, retitle the window or write the clipboard
(OSC 52) of whoever reads the output; they are shown as ``\\x1b``-style escapes instead.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# scheme://[userinfo@]host[...]: userinfo is anything up to the last "@" before the path.
_URL_IN_TEXT = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)([^\s/?#'\"<>]*@)?([^\s?#'\"<>]*)(\?[^\s#'\"<>]*)?")
# C0 controls except TAB and LF, DEL, and the C1 controls (U+0080-U+009F: CSI, OSC... in one byte).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_ALL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def redact_url(url: str) -> str:
    """The URL for messages and display: no ``user:password@`` part and no query string (a pre-signed
    URL's query is its credential). Never show credentials."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return re.sub(r"//[^/@]*@", "//", url.split("?")[0])
    if not (parts.username or parts.password or parts.query or "@" in parts.netloc):
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2], query="").geturl()


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted (userinfo and query dropped): for free-form messages that
    may quote a location, an endpoint or a library's error text."""
    return _URL_IN_TEXT.sub(lambda m: m[1] + m[3], text)


def visible(text: str, *, newlines: bool = True) -> str:
    """``text`` with control characters shown as escapes (``\\x1b``), so that a hostile name cannot
    drive the terminal. TAB and LF stay unless ``newlines`` is False (one-line messages)."""
    pattern = _CONTROL if newlines else _CONTROL_ALL
    return pattern.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), text)


#: The colour escapes eaglekit's own tables use (core.render.ansi): SGR reset, bold, six colours, grey.
_OWN_COLOUR = re.compile(r"(\x1b\[(?:0|1|3[1-6]|90)m)")


def visible_output(text: str) -> str:
    """:func:`visible` for a command's output, keeping eaglekit's own colour escapes (they only colour
    text; every other escape, such as a screen clear or an OSC 52 clipboard write, is shown)."""
    parts = _OWN_COLOUR.split(text)
    return "".join(p if i % 2 else visible(p) for i, p in enumerate(parts))


def shown(text: object) -> str:
    """Text from outside, ready for a one-line message: credentials redacted, controls visible."""
    return visible(redact_text(str(text)), newlines=False)


def location_label(location: str) -> str:
    """A short name for a location (a column or report title): its last path part, never a password or a
    query signature, control characters made visible."""
    shown = redact_text(location)
    parts = [p for p in shown.split("?")[0].rstrip("/").split("/") if p and p != "config.json"]
    return visible(parts[-1] if parts else shown, newlines=False)
