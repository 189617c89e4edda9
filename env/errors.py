"""The error every layer raises for a problem with what its caller asked for.

A folder that is not a run directory, a flag that needs another, a server that is not there:
the library says what is wrong and what to do, without naming a command, because any command
(or a Python caller) may have asked. ``watercolour`` prints it as one line,
``watercolour COMMAND: message``, and exits with status 1. It lives in ``env/``, the lowest
layer, so every folder can raise it without importing up the layers.
"""

from __future__ import annotations


class UsageError(Exception):
    """A request the caller can fix (the message says how); not a bug, so no traceback."""
