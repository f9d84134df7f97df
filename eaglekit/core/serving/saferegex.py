"""``re.match`` for the patterns a config names (compressed-tensors ``ignore: ["re:..."]``), in linear time.

Python's ``re`` backtracks: ``((.)|(.))*Z`` against a 40-character module name takes 2^40 steps, and a
config.json from the Hub may hold it. Here a pattern is parsed by Python's own regex parser, compiled
into a Thompson automaton (a set of states advanced one character at a time, as RE2 does) and run
over the subject: time is at most (pattern states) x (subject length), whatever the pattern.

Supported: literals, ``.``, classes (``[a-z]``, ``\\d``, ``\\w``, ``\\s``, negated), groups, alternation, the
greedy, lazy and possessive quantifiers (a bounded count at most :data:`MAX_COUNT`), ``^``, ``$``, ``\\A``,
``\\Z``; flags ``(?i)`` (``s``, ``m``, ``x``, ``a`` and ``u`` as Python reads them). Backreferences,
lookarounds, conditionals and word boundaries raise :class:`UnsafePattern`, as does a pattern longer than
:data:`MAX_PATTERN` characters or compiling to more than :data:`MAX_STATES` states. Only whether the pattern
matches at the start is answered (``re.match(...) is not None``), which possessive and atomic forms cannot
change for this question except by making a match fail; they are read as their plain forms.
"""

from __future__ import annotations

import re
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as P  # type: ignore[attr-defined]

#: Longest pattern accepted (real ignore patterns are a few dozen characters).
MAX_PATTERN = 1000
#: Longest subject matched (module names are under a hundred).
MAX_SUBJECT = 4096
#: Most automaton states one pattern may compile to (repeat counts multiply states).
MAX_STATES = 20_000
#: Largest bounded repeat count ``{m,n}``.
MAX_COUNT = 1000


class UnsafePattern(ValueError):
    """A pattern this matcher does not evaluate (too long, or a construct outside regular languages)."""


# automaton states: ("char", test, next) | ("split", a, b) | ("assert", kind, next) | ("match",)
_State = list


class _Builder:
    def __init__(self, flags: int) -> None:
        self.states: list[_State] = []
        self.flags = flags

    def new(self, state: _State) -> int:
        if len(self.states) >= MAX_STATES:
            raise UnsafePattern(f"the pattern compiles to more than {MAX_STATES:,} states; shorten it")
        self.states.append(state)
        return len(self.states) - 1

    # each build returns (start, list of dangling (state, slot) to patch to the continuation)
    def seq(self, items, flags: int):
        start, holes = None, []
        for op, av in items:
            s, h = self.one(op, av, flags)
            if start is None:
                start = s
            else:
                self.patch(holes, s)
            holes = h
        if start is None:  # empty sequence: an epsilon
            e = self.new(["split", None, None])
            return e, [(e, 1)]  # slot 2 stays None: split with one branch
        return start, holes

    def patch(self, holes, target: int) -> None:
        for state, slot in holes:
            self.states[state][slot] = target

    def char(self, test):
        s = self.new(["char", test, None])
        return s, [(s, 2)]

    def one(self, op, av, flags: int):
        ic = bool(flags & re.IGNORECASE)
        if op is C.LITERAL:
            ch = chr(av)
            return self.char(_fold(lambda c, ch=ch: c == ch, ic, ch))
        if op is C.NOT_LITERAL:
            ch = chr(av)
            return self.char(lambda c, ch=ch, ic=ic: (c.lower() != ch.lower()) if ic else c != ch)
        if op is C.ANY:
            dotall = bool(flags & re.DOTALL)
            return self.char(lambda c, dotall=dotall: dotall or c != "\n")
        if op is C.IN:
            return self.char(_in_class(av, ic))
        if op is C.AT:
            if av in (C.AT_BEGINNING, C.AT_BEGINNING_STRING, C.AT_END, C.AT_END_STRING):
                kind = av if not (flags & re.MULTILINE) or av not in (C.AT_BEGINNING, C.AT_END) else ("m", av)
                s = self.new(["assert", kind, None])
                return s, [(s, 2)]
            raise UnsafePattern(f"{str(av).lower()} (a word boundary) is not supported; spell the names out")
        if op is C.SUBPATTERN:
            _group, add, delete, sub = av
            return self.seq(sub, (flags | add) & ~delete)
        if op is C.ATOMIC_GROUP:
            return self.seq(av, flags)
        if op is C.BRANCH:
            _, alts = av
            start = None
            holes: list = []
            prev_split = None
            for k, alt in enumerate(alts):
                s, h = self.seq(alt, flags)
                holes += h
                if k < len(alts) - 1:
                    split = self.new(["split", s, None])
                    if prev_split is None:
                        start = split
                    else:
                        self.states[prev_split][2] = split
                    prev_split = split
                else:
                    if prev_split is None:
                        start = s
                    else:
                        self.states[prev_split][2] = s
            return start, holes
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, item = av
            if lo > MAX_COUNT or (hi is not C.MAXREPEAT and hi > MAX_COUNT):
                raise UnsafePattern(f"a repeat count above {MAX_COUNT} is not supported")
            start, holes = None, []

            def link(s, h):
                nonlocal start, holes
                if start is None:
                    start = s
                else:
                    self.patch(holes, s)
                holes = h

            for _ in range(lo):
                link(*self.seq(item, flags))
            if hi is C.MAXREPEAT:  # a loop: split -> item -> back to split
                split = self.new(["split", None, None])
                s, h = self.seq(item, flags)
                self.states[split][1] = s
                self.patch(h, split)
                link(split, [(split, 2)])
            else:
                exits: list = []
                for _ in range(hi - lo):
                    split = self.new(["split", None, None])
                    link(split, [])
                    s, h = self.seq(item, flags)
                    self.states[split][1] = s
                    exits.append((split, 2))
                    holes = h
                holes = holes + exits if hi > lo else holes
                if start is None:
                    e = self.new(["split", None, None])
                    start, holes = e, [(e, 1)]
            return start, holes
        name = str(op).lower()
        raise UnsafePattern(f"{name} (backreferences, lookarounds, conditionals) is not supported in a safe "
                            "pattern; list the module names instead")


def _fold(test, ic: bool, ch: str):
    if not ic:
        return test
    low = ch.lower()
    return lambda c: c.lower() == low


_CATEGORIES = {
    C.CATEGORY_DIGIT: str.isdigit, C.CATEGORY_NOT_DIGIT: lambda c: not c.isdigit(),
    C.CATEGORY_SPACE: str.isspace, C.CATEGORY_NOT_SPACE: lambda c: not c.isspace(),
    C.CATEGORY_WORD: lambda c: c.isalnum() or c == "_", C.CATEGORY_NOT_WORD: lambda c: not (c.isalnum() or c == "_"),
}


def _in_class(items, ic: bool):
    negate = False
    tests = []
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            tests.append(lambda c, ch=chr(av): c == ch)
        elif op is C.RANGE:
            tests.append(lambda c, lo=av[0], hi=av[1]: lo <= ord(c) <= hi)
        elif op is C.CATEGORY and av in _CATEGORIES:
            tests.append(_CATEGORIES[av])
        else:
            raise UnsafePattern(f"{str(op).lower()} in a character class is not supported")

    def test(c: str) -> bool:
        cands = {c, c.lower(), c.upper()} if ic else (c,)
        hit = any(t(x) for x in cands for t in tests)
        return hit != negate
    return test


def compile_safe(pattern: str) -> tuple[list[_State], int]:
    """(automaton states, start state) for ``pattern``; :class:`UnsafePattern` when it is not supported."""
    if not isinstance(pattern, str):
        raise UnsafePattern("a pattern must be text")
    if len(pattern) > MAX_PATTERN:
        raise UnsafePattern(f"a pattern of {len(pattern):,} characters is longer than {MAX_PATTERN} (real ones are "
                            "a few dozen)")
    try:
        parsed = P.parse(pattern, 0)
    except (re.error, RecursionError, OverflowError) as e:
        raise UnsafePattern(f"not a regular expression ({str(e)[:100]})") from None
    flags = parsed.state.flags
    b = _Builder(flags)
    start, holes = b.seq(list(parsed), flags)
    b.patch(holes, b.new(["match"]))
    return b.states, start


def safe_match(pattern: str, subject: str) -> bool:
    """Whether ``re.match(pattern, subject)`` would find a match, computed in linear time."""
    if len(subject) > MAX_SUBJECT:
        raise UnsafePattern(f"a subject of {len(subject):,} characters is longer than {MAX_SUBJECT}")
    states, start = compile_safe(pattern)
    n = len(subject)

    def holds(kind, i: int) -> bool:
        if kind is C.AT_BEGINNING or kind is C.AT_BEGINNING_STRING:
            return i == 0
        if kind is C.AT_END:
            return i == n or (i == n - 1 and subject[i] == "\n")
        if kind is C.AT_END_STRING:
            return i == n
        _, k = kind  # multiline ^ and $
        if k is C.AT_BEGINNING:
            return i == 0 or subject[i - 1] == "\n"
        return i == n or subject[i] == "\n"

    def closure(seeds, i: int) -> tuple[set[int], bool]:
        seen: set[int] = set()
        stack = list(seeds)
        chars = set()
        matched = False
        while stack:
            s = stack.pop()
            if s is None or s in seen:
                continue
            seen.add(s)
            st = states[s]
            if st[0] == "split":
                stack += [st[1], st[2]]
            elif st[0] == "assert":
                if holds(st[1], i):
                    stack.append(st[2])
            elif st[0] == "match":
                matched = True
            else:
                chars.add(s)
        return chars, matched

    current, matched = closure([start], 0)
    for i, c in enumerate(subject):
        if matched:
            return True
        if not current:
            return False
        nxt = [states[s][2] for s in current if states[s][1](c)]
        current, matched = closure(nxt, i + 1)
    return matched


__all__ = ["MAX_PATTERN", "MAX_STATES", "UnsafePattern", "compile_safe", "safe_match"]
