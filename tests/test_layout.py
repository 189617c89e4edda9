"""The layout ARCHITECTURE.md promises, read from the source: imports run down the layers, the
trainer's modules form no import circle, and only a folder's commands.py builds its CLI."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

# Lowest first: a module may import its own folder and the folders before it, never one after.
LAYERS = ("env", "rewards", "agent", "multiturn_trainer", "curation", "watercolour")


def modules(folder: str) -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(path: Path) -> set[str]:
    """Every module named by an import anywhere in the file, function-level imports included."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_imports_run_down_the_layers():
    wrong = []
    for rank, folder in enumerate(LAYERS):
        for name, path in modules(folder).items():
            for target in imported(path):
                top = target.split(".")[0]
                if top in LAYERS and LAYERS.index(top) > rank:
                    wrong.append(f"{name} imports {target}")
    assert not wrong, wrong


def test_the_trainers_modules_form_no_import_circle():
    mods = modules("multiturn_trainer")
    graph = {name: {t for t in imported(path) if t in mods and t != name} for name, path in mods.items()}
    # A package and its own modules are one node (its __init__ re-exports them).
    def node(name: str) -> str:
        return "multiturn_trainer.procedural" if name.startswith("multiturn_trainer.procedural") else name
    edges = {}
    for name, targets in graph.items():
        edges.setdefault(node(name), set()).update(node(t) for t in targets if node(t) != node(name))

    state: dict[str, str] = {}
    circles = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(edges.get(name, ())):
            if state.get(target) == "open":
                circles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[name] = "done"

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert not circles, circles


def test_only_commands_modules_parse_arguments_or_are_imported_for_them():
    """Every folder's subcommands live in its commands.py; the library never builds a parser (the
    config's TRL parser over TrainConfig is the config itself, not a command)."""
    for folder in ("env", "rewards", "agent", "multiturn_trainer", "curation"):
        for name, path in modules(folder).items():
            if name.endswith(".commands"):
                continue
            text = path.read_text(encoding="utf-8")
            assert "add_subparsers" not in text and "def add_parser" not in text, name
            if name != "multiturn_trainer.config":
                assert "add_argument(" not in text and "ArgumentParser(" not in text, name
            assert not any(t.endswith(".commands") for t in imported(path)), name
