"""Files and places every layer needs: where the project's data lives, and atomic writes.

This module lives in ``env/`` because ``env`` is the lowest layer: ``rewards``,
``agent`` and ``multiturn_trainer`` may import it, while it imports none of them. Keeping the
one definition here lets every layer use it without an import that runs up the layers.
"""

from __future__ import annotations

import os
import secrets
from importlib import resources
from pathlib import Path

# The data the code reads: YAML presets (configs/), example sketches (examples/) and the
# starter reference pool (pools/starter). A wheel ships them as watercolour/_data/<folder>
# (pyproject.toml maps each folder there), so they are found without a checkout.


def source_root() -> Path | None:
    """The project checkout these modules run from (an editable install, or PYTHONPATH set to
    it), or None when they run from an installed wheel (site-packages holds no pyproject.toml)."""
    root = Path(__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and (root / "configs").is_dir() and 'name = "watercolour"' in pyproject.read_text():
        return root
    return None


def data_root() -> Path:
    """The folder holding configs/, examples/ and pools/: the checkout's own when running from a
    source tree (edits show at once), else the copy shipped in the package (watercolour/_data)."""
    root = source_root()
    if root is not None:
        return root
    shipped = resources.files("watercolour") / "_data"
    if not isinstance(shipped, Path) or not (shipped / "configs").is_dir():
        raise RuntimeError(f"watercolour's data files are missing from the installed package ({shipped}); "
                           "reinstall it with `pip install` from the project checkout")
    return shipped


# configs/, examples/ and pools/ are found from here (see data_root).
DATA_ROOT = data_root()


def data_file(relative: str | Path) -> Path | None:
    """``relative`` (e.g. ``configs/smoke.yaml``) inside the project's data, or None if absent."""
    path = DATA_ROOT / relative
    return path if path.exists() else None


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
