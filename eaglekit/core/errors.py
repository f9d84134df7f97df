"""eaglekit's error types: one base class, each message says what was wrong and what to do.

Library code raises these (chained with ``from e`` when they wrap another error); the CLI turns any
:class:`EaglekitError` into one line on stderr and exit code 2.
"""

from __future__ import annotations


class EaglekitError(Exception):
    """Base class of every error eaglekit raises on bad input or an unreachable location."""


class LocationError(EaglekitError):
    """A location string is malformed, or what it names does not exist or cannot be reached."""


class NotFoundError(LocationError):
    """The file, folder, repository, revision or remote path does not exist."""


class AuthError(LocationError):
    """The server refused the credentials (401/403, gated repo, SSH authentication failure)."""


class HostKeyError(LocationError):
    """An SSH host key is unknown or does not match known_hosts; never accepted silently."""


class TooLargeError(LocationError):
    """A small file (a config, a tokenizer file, a template) is larger than the cap for its kind: refused
    before its bytes are read past the cap."""


class RangeNotSupportedError(LocationError):
    """An HTTP server ignored a byte-range request; eaglekit refuses to stream the whole file."""


class RateLimitError(LocationError):
    """The server answered 429; the message carries the retry time it gave."""


class OfflineError(LocationError):
    """Offline mode (HF_HUB_OFFLINE) forbids the request."""


class HeaderError(EaglekitError):
    """A safetensors header is truncated, malformed or inconsistent with its file."""


class ConfigError(EaglekitError):
    """A config.json is not JSON, not an object, or lacks the fields eaglekit needs."""


class VocabMapError(EaglekitError):
    """The d2t/t2d vocabulary map is missing, of the wrong dtype or length, or breaks a rule."""


class InputError(EaglekitError):
    """An argument value is out of range or inconsistent (negative time, alpha outside [0, 1), ...)."""
