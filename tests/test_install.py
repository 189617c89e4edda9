"""It installs as a package: the wheel carries the data files, and node_modules is found in order."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import env.renderer as renderer
from env.files import DATA_ROOT
from multiturn_trainer.config import resolve_config_path

ROOT = Path(__file__).resolve().parent.parent
DATA_FOLDERS = ("configs", "examples", "pools/starter")
# What a build needs; a copy of it, so stale build/ output in the checkout cannot leak in.
SOURCES = ("pyproject.toml", "README.md", "agent", "curation", "env", "multiturn_trainer", "rewards", "watercolour",
           "configs", "examples", "pools")


def _build_wheel(tmp_path: Path) -> zipfile.ZipFile:
    source = tmp_path / "src"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(out), str(source)], check=True, capture_output=True, text=True, timeout=120)
    (wheel,) = out.glob("watercolour-*.whl")
    return zipfile.ZipFile(wheel)


def test_wheel_ships_the_data_files_the_code_reads(tmp_path):
    names = set(_build_wheel(tmp_path).namelist())
    for required in ("watercolour/_data/configs/smoke.yaml", "watercolour/_data/configs/demo.yaml",
                     "watercolour/_data/configs/subjects.yaml", "watercolour/_data/configs/rewards/style-offline.yaml",
                     "watercolour/_data/configs/accelerate/zero3.yaml", "watercolour/_data/examples/sketches/poppies.js",
                     "watercolour/_data/examples/simple/two_apples.js", "watercolour/_data/pools/starter/manifest.jsonl",
                     "env/page/runtime.js", "curation/static/pool_app.html",
                     "multiturn_trainer/data/qwen3_5_chat_template.jinja", "watercolour/cli.py"):
        assert required in names, required
    # Every data file in the checkout is shipped (a new preset or example needs no pyproject edit
    # unless it is a new kind of file), and so is every package with its modules.
    for folder in DATA_FOLDERS:
        for path in (ROOT / folder).rglob("*"):
            if path.is_file():
                assert f"watercolour/_data/{path.relative_to(ROOT)}" in names, path
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    for package in packages:
        for module in (ROOT / package).rglob("*.py"):
            assert str(module.relative_to(ROOT)) in names, module
    # The starter pool's manifest points at its sketches by relative path: the layout is kept.
    entry = json.loads((ROOT / "pools/starter/manifest.jsonl").read_text().splitlines()[0])
    shipped = Path("watercolour/_data/pools/starter") / entry["source_file"]
    assert str(Path(*_normalised(shipped.parts))) in names


def _normalised(parts: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for part in parts:
        if part == "..":
            out.pop()
        else:
            out.append(part)
    return out


def test_presets_resolve_from_any_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    smoke = DATA_ROOT / "configs" / "smoke.yaml"
    assert resolve_config_path("configs/smoke.yaml") == smoke
    assert resolve_config_path("smoke") == smoke
    assert resolve_config_path("qwen3.5-4b") == DATA_ROOT / "configs" / "qwen3.5-4b.yaml"
    assert resolve_config_path("nowhere.yaml") == Path("nowhere.yaml")  # the caller's error names it as typed
    # A file of the same name in the working directory is the user's and comes first.
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "smoke.yaml").write_text("steps: 1\n")
    assert resolve_config_path("configs/smoke.yaml") == Path("configs/smoke.yaml")


def _modules(folder: Path, **versions: str) -> Path:
    for name, version in {**renderer.NPM_PINS, **versions}.items():
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "package.json").write_text(json.dumps({"name": name, "version": version}))
    return folder


def test_node_modules_are_found_in_order_and_missing_ones_say_how_to_get_them(tmp_path, monkeypatch):
    checkout, cwd, override = tmp_path / "checkout", tmp_path / "cwd", tmp_path / "override"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(renderer, "source_root", lambda: checkout)
    monkeypatch.delenv("WATERCOLOUR_NODE_MODULES", raising=False)

    # Nothing anywhere: the error names each place and both ways out.
    with pytest.raises(FileNotFoundError, match="npm ci") as missing:
        renderer.node_modules_dir()
    assert "WATERCOLOUR_NODE_MODULES" in str(missing.value) and str(checkout / "node_modules") in str(missing.value)

    # The working directory's, then the checkout's ahead of it; a wrong version is passed over.
    _modules(cwd / "node_modules")
    assert renderer.node_modules_dir() == cwd / "node_modules"
    _modules(checkout / "node_modules", ses="2.2.0")
    assert renderer.node_modules_dir() == cwd / "node_modules"
    _modules(checkout / "node_modules")
    assert renderer.node_modules_dir() == checkout / "node_modules"

    # An installed package (no checkout) looks in the working directory only.
    monkeypatch.setattr(renderer, "source_root", lambda: None)
    assert renderer.node_modules_dir() == cwd / "node_modules"

    # The variable comes first and alone: a wrong one is an error, never a silent fallback.
    monkeypatch.setenv("WATERCOLOUR_NODE_MODULES", str(override))
    with pytest.raises(FileNotFoundError, match=r"\$WATERCOLOUR_NODE_MODULES.*no p5"):
        renderer.node_modules_dir()
    _modules(override, p5="1.11.0")
    with pytest.raises(FileNotFoundError, match="p5 1.11.0, not 2.3.4"):
        renderer.node_modules_dir()
    _modules(override)
    assert renderer.node_modules_dir() == override
    assert renderer.library_files()["/p5.brush.js"] == override / "p5.brush" / "dist" / "p5.brush.js"
