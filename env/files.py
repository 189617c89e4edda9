"""Files and places every layer needs: the project root and atomic writes.

This module lives in ``env/`` because ``env`` is the lowest layer: ``rewards``,
``agent`` and ``multiturn_trainer`` may import it, while it imports none of them. Keeping the
one definition here lets every layer use it without an import that runs up the layers.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

# The checkout: configs/, examples/, pools/ and node_modules/ are found from here.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so a reader sees the old file or the new, never half.

    The text goes to a temporary file beside ``path``, which is fsynced, renamed over
    ``path``, and the directory fsynced so the rename itself survives a crash. The file gets
    the permissions the umask gives a new file, as ``Path.write_text`` would.
    """
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
