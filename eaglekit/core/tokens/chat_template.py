"""Chat templates rendered the way transformers renders them, with an output limit.

The environment is transformers' (``utils/chat_template_utils.py`` ``_cached_compile_jinja_template``):
jinja2's ``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`` with the ``loopcontrols``
extension and a ``{% generation %}`` block tag, ``tojson`` without HTML escaping, and the globals
``raise_exception`` (a template's own error), ``strftime_now``, ``dict`` and a ``namespace`` that refuses
underscore names. transformers renders ``messages``, ``tools``, ``documents``, ``add_generation_prompt``
and the tokenizer's special tokens (``bos_token``, ``eos_token``, ...) and refuses jinja2 older than 3.1.6
(known sandbox escapes); so does :func:`environment`.

The sandbox stops a template from reaching Python internals; it does not stop one from looping 10^10 times
or building a 3 GB string (jinja2 even folds ``'x' * 3000000000`` while compiling). :func:`render` stops
output past ``max_chars`` and work past ``max_steps``: every line of the compiled template's own code that runs
(each loop iteration, each ``set``, each macro call's body) is one step, counted with a line tracer on the
template's frames only, so a template that loops without printing is cut after the same amount of work on an
idle or a loaded machine (real templates take a few dozen steps per message). Memory, and time as a last
resort, are bounded by the process that calls it (:mod:`eaglekit.io.tokens.templates` renders in a child
process under a wall clock and an address-space limit).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from eaglekit.core.errors import InputError

#: Characters one rendered prompt may have (a long real prompt renders to a few hundred thousand).
MAX_RENDERED_CHARS = 4 * 1024 * 1024
#: Bytes a chat template file may have (real ones are a few KiB, the largest about 50 KiB).
MAX_TEMPLATE_BYTES = 1024 * 1024
#: Lines of template code one prompt's rendering may run (real templates: tens per message; a 1,000-message
#: conversation through a tool-calling template stays under 100,000).
MAX_TEMPLATE_STEPS = 2_000_000


class TemplateLimitError(InputError):
    """A template rendered more than the output limit, ran past its time, or needed too much memory."""


def environment():
    """transformers' sandboxed chat-template environment (see the module docstring)."""
    from datetime import datetime

    # jinja2 loads only where a template is rendered (the child process of eaglekit.io.tokens.templates)
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    if tuple(int(p) for p in jinja2.__version__.split(".")[:3] if p.isdigit()) < (3, 1, 6):
        raise InputError(f"chat templates need jinja2 >= 3.1.6 (older versions have known sandbox escapes); this "
                         f"Python has {jinja2.__version__}: pip install -U jinja2.")

    class Generation(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}``: transformers marks assistant spans with it; the text
        renders unchanged."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.Scope(body).set_lineno(lineno)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    class TemplateDict:
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        def __init__(*args, **kwargs):
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check_name(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(f"chat templates cannot store underscore names on a "
                                                      f"namespace, got {name!r}.")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now, dict=TemplateDict(),
                       namespace=TemplateNamespace)
    return env


def render(template: str, conversations: Sequence[Sequence[Mapping[str, Any]]], *, add_generation_prompt: bool = True,
           variables: Mapping[str, Any] | None = None, max_chars: int = MAX_RENDERED_CHARS,
           what: str = "the chat template", max_steps: int = MAX_TEMPLATE_STEPS) -> list[str]:
    """Each conversation rendered with ``template``; a template error, a sandbox refusal, output past
    ``max_chars`` or work past ``max_steps`` is one :class:`InputError` naming ``what``. Run it where time and
    memory are bounded."""
    import jinja2  # see environment()

    env = environment()
    try:
        compiled = env.from_string(template)
    except jinja2.TemplateSyntaxError as e:
        raise InputError(f"{what} is not a valid Jinja template: {e.message} (line {e.lineno}).") from e
    out = []
    for messages in conversations:
        parts, size = [], 0
        try:
            for chunk in _counted(compiled.generate(messages=[dict(m) for m in messages], tools=None, documents=None,
                                                    add_generation_prompt=add_generation_prompt,
                                                    **dict(variables or {})), max_steps, what):
                size += len(chunk)
                if size > max_chars:
                    raise TemplateLimitError(f"{what} renders more than {max_chars:,} characters for one prompt; "
                                             "stopped (a template that loops or repeats text without end).")
                parts.append(chunk)
        except jinja2.exceptions.SecurityError as e:
            raise InputError(f"{what} tried something the sandbox refuses: {str(e).rstrip('.')}.") from e
        except jinja2.TemplateError as e:  # raise_exception() and every other template error
            raise InputError(f"{what} raised an error: {str(e).rstrip('.')}.") from e
        except OverflowError as e:  # jinja2's range() cap, int overflows
            raise TemplateLimitError(f"{what} stopped: {e}.") from e
        except RecursionError as e:
            raise TemplateLimitError(f"{what} recursed too deeply; stopped.") from e
        except MemoryError as e:
            raise TemplateLimitError(f"{what} needed more memory than a chat template may use; stopped.") from e
        except (TypeError, ValueError, KeyError, AttributeError, IndexError, ZeroDivisionError) as e:
            raise InputError(f"{what} failed on the prompt: {type(e).__name__}: {str(e)[:200]}.") from e
        out.append("".join(parts))
    return out


#: The file name jinja2 gives the code it compiles from a string (``Environment.compile``).
_TEMPLATE_FILE = "<template>"


def _counted(chunks: Iterator[str], max_steps: int, what: str) -> Iterator[str]:
    """``chunks`` (a template's generator) with every line of template code it runs counted: past ``max_steps``
    a :class:`TemplateLimitError` is raised inside the template (a trace function's exception propagates into
    the traced frame). Only frames of the compiled template are traced line by line; the tracer that was set
    before (a coverage tool's) is restored after every chunk."""
    steps = 0

    def local(frame, event, arg):
        nonlocal steps
        if event == "line":
            steps += 1
            if steps > max_steps:
                raise TemplateLimitError(f"{what} ran more than {max_steps:,} steps of template code for one prompt; "
                                         "stopped (a template that loops without end, counted by work, not by the "
                                         "clock).")
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename == _TEMPLATE_FILE else None

    while True:
        before = sys.gettrace()
        sys.settrace(calls)
        try:
            chunk = next(chunks)
        except StopIteration:
            return
        finally:
            sys.settrace(before)
        yield chunk
