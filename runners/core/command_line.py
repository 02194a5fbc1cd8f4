"""The command line of the Hydra entry points, checked before Hydra reads it: values that need quoting.

A path with spaces typed unquoted, ``dataset.path=/tmp/my data.csv``, reaches Hydra as two
arguments, ``dataset.path=/tmp/my`` and ``data.csv``, and Hydra only says "Error parsing override
'data.csv' missing EQUAL"; a value with characters its override grammar gives a meaning to
(``my data (1).csv``, ``it's.csv``, ``a#b.csv``) gets a bare lexer error.  :func:`override_problem`
recognises both and says how to quote the value: for Hydra inside the shell's quotes,
``"dataset.path='/tmp/my data.csv'"``.  A value with inner spaces that Hydra reads as given (one
shell argument ``dataset.path=/tmp/my data.csv``) passes.

:func:`check_command_line` runs it from ``runners/__init__.py``, which the interpreter imports before
the module of ``python -m runners.<name>``: one place for every Hydra entry point
(:data:`HYDRA_ENTRY_POINTS`), before Hydra parses anything and long before any fit or MLflow run.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Sequence

#: the runners whose ``main`` is a ``@hydra.main`` (tests/datasets/test_adversarial_own_data.py checks
#: the list)
HYDRA_ENTRY_POINTS = ("feature_utility", "multitask", "reproduce", "run", "tune")
# characters a shell would expand or end inside "..." (then the hint uses shlex.quote instead)
_SHELL_SPECIAL = set('$`\\!')


def check_command_line() -> None:
    """Exit with a message saying how to quote a value (status 1) when this process runs a Hydra
    entry point (``python -m runners.<name>``) whose command line Hydra would refuse for want of
    quotes; else do nothing."""
    if entry_point() in HYDRA_ENTRY_POINTS:
        problem = override_problem(sys.argv[1:])
        if problem:
            sys.exit(problem)


def entry_point() -> str | None:
    """The ``<name>`` of ``python -m runners.<name>`` while the interpreter imports the ``runners``
    package for it, else None.

    During that import ``sys.argv[0]`` is ``"-m"`` (the module's path replaces it afterwards) and
    ``sys.argv[1:]`` are the module's arguments, the tail of ``sys.orig_argv``; the element before
    that tail names the module (``runners.run``, or ``-mrunners.run`` when written together).
    """
    orig = getattr(sys, "orig_argv", None)
    if sys.argv[:1] != ["-m"] or not orig or len(orig) < len(sys.argv):
        return None
    module = orig[len(orig) - len(sys.argv)]
    module = module[2:] if module.startswith("-m") else module
    package, _, name = module.partition(".")
    return name if package == "runners" and name else None


def override_problem(args: Sequence[str]) -> str | None:
    """Why Hydra would refuse the overrides of the command line ``args`` for want of quotes, with
    the quoted form to use; None when it reads them (or refuses them for another reason, which
    Hydra then reports itself)."""
    overrides = _overrides(args)
    if overrides is None:
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for i, text in enumerate(overrides):
        try:
            parser.parse_overrides([text])
            continue
        except Exception as exc:        # Hydra's OverrideParseException (and its lexer's errors)
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "=" not in text:
            return _split_value(overrides, i)
        key, value = text.split("=", 1)
        hint = quoted(key, value)
        if hint is None:
            return None
        return (f"error: Hydra cannot read the override {text!r} ({reason}): its override grammar gives "
                f"characters such as ( ) [ ] {{ }} , ' \" # ! and letters beyond ASCII a meaning, or refuses "
                f"them, in a value that is not quoted. Quote the value for Hydra, inside the shell's "
                f"quotes:\n  {hint}")
    return None


def _overrides(args: Sequence[str]) -> list[str] | None:
    """The overrides among ``args`` as Hydra's own argument parser finds them (None if it refuses
    the options: Hydra reports that itself)."""
    try:
        from hydra._internal.utils import get_args_parser
    except ImportError:                   # another Hydra: let it parse alone
        return None
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            parsed = get_args_parser().parse_args(list(args))
    except SystemExit:
        return None
    # shell completion is handed words being typed: unfinished quotes are no error there
    return None if parsed.shell_completion else list(parsed.overrides)


def _split_value(overrides: list[str], i: int) -> str | None:
    """The message for words the shell split off the value of the override before them."""
    start = i
    while start > 0 and "=" not in overrides[start - 1]:
        start -= 1
    if start == 0:
        return None                       # no key=value before the words: not a split value
    end = i
    while end < len(overrides) and "=" not in overrides[end]:
        end += 1
    key, head = overrides[start - 1].split("=", 1)
    words = overrides[start:end]
    value = " ".join([head, *words])
    hint = quoted(key, value)
    if hint is None:
        return None
    return (f"error: the shell split the value of {key} at its spaces: Hydra got {overrides[start - 1]!r}, "
            f"then {', '.join(map(repr, words))}, which "
            f"{'is not an override' if len(words) == 1 else 'are not overrides'} (key=value). Quote the "
            f"whole argument, and the value inside it for Hydra:\n"
            f"  {hint}\n(the shell also turned any run of spaces into one: check the value)")


def quoted(key: str, value: str) -> str | None:
    """The shell argument that gives Hydra ``key`` = the string ``value``: the value quoted for
    Hydra, the whole quoted for a POSIX shell (None if no quoting tried reads back as ``value``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for candidate in _hydra_quotes(value):
        try:
            parsed = parser.parse_overrides([f"{key}={candidate}"])[0].value()
        except Exception:                 # this quoting does not parse: try the next
            continue
        if parsed == value:
            return _shell_quote(f"{key}={candidate}")
    return None


def _hydra_quotes(value: str) -> list[str]:
    """Quoted forms of ``value`` in Hydra's grammar, the most readable first (backslashes before a
    quote are escaped in the last ones)."""
    escaped = value.replace("\\", "\\\\")
    return [f"'{value}'", f'"{value}"', "'" + escaped.replace("'", "\\'") + "'",
            '"' + escaped.replace('"', '\\"') + '"']


def _shell_quote(arg: str) -> str:
    """``arg`` as one POSIX shell word: in double quotes where that is plain, else ``shlex.quote``."""
    if not _SHELL_SPECIAL & set(arg):
        return '"' + arg.replace('"', '\\"') + '"'
    import shlex

    return shlex.quote(arg)
