"""Chat templates from files, rendered in a child process that cannot hang or exhaust the machine.

A template is code from someone else. :func:`read_template` reads a file as checkpoints are read (a
regular file, its size checked before a byte is read: :data:`~eaglekit.core.tokens.chat_template.MAX_TEMPLATE_BYTES`).
:func:`render_bounded` renders it with :func:`eaglekit.core.tokens.chat_template.render` in a fresh Python
process limited to :data:`MEMORY_LIMIT` of address space and :data:`TIME_LIMIT` seconds of wall clock (and
CPU), whose answer is read through a capped pipe: a template that loops 10^10 times, or renders
``'x' * 3000000000``, ends as one line, never as a hung or swapping machine. Run as ``python -m
eaglekit.io.tokens.templates`` it is that child (JSON in on stdin, JSON out on stdout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    import resource
except ImportError:  # not on Windows: there the wall clock alone bounds the child
    resource = None

from eaglekit.core.tokens.chat_template import MAX_RENDERED_CHARS, MAX_TEMPLATE_BYTES, TemplateLimitError, render
from eaglekit.core.errors import InputError, TooLargeError
from eaglekit.core.redact import shown
from eaglekit.io.sources.local import LocalSource

#: Address space the rendering process may map (Python and jinja2 need about 100 MiB of it).
MEMORY_LIMIT = 768 * 1024 * 1024
#: Seconds a template may take for the prompts of one call: this much, plus :data:`TIME_PER_PROMPT` each.
TIME_LIMIT = 20.0
#: Real templates render a prompt in well under a millisecond; this leaves a hundredfold margin.
TIME_PER_PROMPT = 0.05


def read_template(path: str | os.PathLike[str], *, limit: int = MAX_TEMPLATE_BYTES) -> str:
    """A chat template file's text: a regular file of at most ``limit`` bytes, UTF-8."""
    file = Path(path).expanduser()
    if not file.exists():
        raise InputError(f"{shown(file)}: no such chat template file.")
    source = LocalSource(str(file.parent), display=str(file), named=file.name)
    try:
        data = source.read_small(file.name, limit=limit)
    except TooLargeError as e:
        raise InputError(f"{shown(file)} is larger than {limit:,} bytes; a chat template is a few KiB: refusing "
                         "it.") from e
    if data is None:
        raise InputError(f"{shown(file)}: no such chat template file.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{shown(file)} is not UTF-8 text ({e.reason} at byte {e.start}).") from e


def render_bounded(template: str, conversations: Sequence[Sequence[Mapping[str, Any]]], *,
                   add_generation_prompt: bool = True, variables: Mapping[str, Any] | None = None,
                   what: str = "the chat template", max_chars: int = MAX_RENDERED_CHARS,
                   timeout: float | None = None, memory: int = MEMORY_LIMIT) -> list[str]:
    """Every conversation rendered with ``template`` in a bounded child process (see the module docstring);
    ``timeout`` defaults to :data:`TIME_LIMIT` plus :data:`TIME_PER_PROMPT` per conversation."""
    if timeout is None:
        timeout = TIME_LIMIT + TIME_PER_PROMPT * len(conversations)
    if len(template.encode("utf-8", "surrogatepass")) > MAX_TEMPLATE_BYTES:
        raise InputError(f"{what} is larger than {MAX_TEMPLATE_BYTES:,} bytes; a chat template is a few KiB: "
                         "refusing it.")
    request = json.dumps({"template": template, "conversations": [list(map(dict, c)) for c in conversations],
                          "add_generation_prompt": add_generation_prompt, "variables": dict(variables or {}),
                          "max_chars": max_chars, "what": what, "memory": memory, "cpu": int(timeout) + 1})
    # the child imports this same eaglekit (PYTHONPATH), nothing from the user's site or environment
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "SYSTEMROOT")}
    env["PYTHONPATH"] = _package_root()
    try:
        proc = subprocess.run([sys.executable, "-s", "-m", "eaglekit.io.tokens.templates"], input=request.encode(),
                              capture_output=True, timeout=timeout, env=env, cwd=_package_root())
    except subprocess.TimeoutExpired as e:
        raise TemplateLimitError(f"{what} was still rendering after {timeout:g} s; stopped (a template that loops "
                                 "without end).") from e
    try:
        answer = json.loads(proc.stdout.decode("utf-8")) if proc.stdout else None
    except ValueError:
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        kind = TemplateLimitError if answer.get("limit") else InputError
        raise kind(shown(answer["error"]))
    if isinstance(answer, dict) and isinstance(answer.get("rendered"), list):
        return [str(t) for t in answer["rendered"]]
    if proc.returncode < 0 or proc.returncode in (137, 152):
        raise TemplateLimitError(f"{what} ran out of its time or memory allowance ({MEMORY_LIMIT >> 20} MiB, "
                                 f"{timeout:g} s) while rendering; stopped.")
    tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
    raise InputError(f"{what} could not be rendered: {shown(tail[0])[:300]}.")


def _package_root() -> str:
    """The folder holding this ``eaglekit`` package (eaglekit/io/tokens/templates.py: three levels up), so the
    child imports this same code, not another copy installed in site-packages."""
    return str(Path(__file__).resolve().parents[3])


def _child() -> int:
    """The rendering process: limits first, then the request, then one JSON answer."""
    if resource is not None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    req = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    if resource is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (req["cpu"], req["cpu"] + 1))
        if req["memory"] < MEMORY_LIMIT:
            resource.setrlimit(resource.RLIMIT_AS, (req["memory"], req["memory"]))
    try:
        out = {"rendered": render(req["template"], req["conversations"], add_generation_prompt=req["add_generation_prompt"],
                                  variables=req["variables"], max_chars=req["max_chars"], what=req["what"])}
    except TemplateLimitError as e:
        out = {"error": str(e), "limit": True}
    except InputError as e:
        out = {"error": str(e)}
    except MemoryError:
        out = {"error": f"{req['what']} needed more memory than a chat template may use; stopped.", "limit": True}
    except RecursionError:
        out = {"error": f"{req['what']} recursed too deeply; stopped.", "limit": True}
    sys.stdout.write(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(_child())
