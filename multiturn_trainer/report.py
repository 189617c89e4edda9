"""`watercolour report RUN_DIR...`: runs (and evals) side by side on the same axes.

Reads any number of run directories (``episodes.jsonl``, ``metrics.jsonl``, ``config.yaml``,
``renders/step-N/contact_sheet.png``) and eval directories (``eval.json``) and writes to
``--out`` (default ``out/report``):

* ``reward.png``: the episode reward and each reward component by step, by wall time (the
  step's generate + render + score + train seconds, summed) and by generated tokens, each a
  per-step mean with its bootstrap 95 % band over the step's episodes;
* ``turns.png``: gate pass and coverage per turn, by step, with bands;
* ``turn_gain.png``: final-turn minus turn-1 reward by step and by tokens, with bands;
* ``eval.png``: each eval's reward by turn (refine) and best of k (independent), with intervals;
* ``report.json``: every number plotted;
* ``index.html``: one self-contained page (images embedded) with a table of the runs (reward
  first/last third, rise with its interval, turn gain), the plots, and each run's contact
  sheets of its first and last steps.

This is how `turns: 3` is compared with `turns: 1`, or one reward preset with another.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from env.errors import UsageError
from multiturn_trainer import evaluation_stats as stats
from multiturn_trainer.config import TrainConfig, load_config
from multiturn_trainer.evaluation_stats import mean
from multiturn_trainer.plots import band, pyplot, save
from multiturn_trainer.store import CONFIG, RunStore, tokens_by_turn, turn_gains
from rewards.mixer import COMPONENTS

BAND_RESAMPLES = 1000  # per plotted point; the interval's ends move by < 0.01 of a sd beyond this
PHASES = ("time/generate", "time/render", "time/score", "time/train")


# --- a run's figures (also `bench learn`'s) ---------------------------------------------------

def thirds(episodes: list[dict[str, Any]]) -> tuple[list[dict], list[dict], int]:
    """The episodes of the first and the last third of the steps (at least one step each)."""
    steps = sorted({e["step"] for e in episodes})
    third = max(1, len(steps) // 3)
    first, last = set(steps[:third]), set(steps[-third:])
    return [e for e in episodes if e["step"] in first], [e for e in episodes if e["step"] in last], len(steps)


def final_turn(episode: dict[str, Any]) -> dict[str, Any] | None:
    turns = episode.get("turns") or []
    return turns[-1] if turns else None


def episode_values(episodes: list[dict[str, Any]], what: str) -> list[float | None]:
    """Per episode: ``reward``, ``gate`` (the rewarded painting passed) or ``blank`` (it failed
    with the gate's blank_canvas reason). Unscorable episodes (reward None) are left out."""
    values: list[float | None] = []
    for episode in episodes:
        if episode.get("reward") is None:
            values.append(None)
            continue
        turn = final_turn(episode)
        if what == "reward":
            values.append(float(episode["reward"]))
        elif what == "gate":
            values.append(float(bool(turn and turn.get("passed"))))
        elif what == "blank":
            values.append(float(bool(turn and "blank_canvas" in (turn.get("violations") or []))))
        else:
            raise ValueError(what)
    return values


def run_figures(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """First third, last third and rise (last minus first) of reward, gate pass and blank rate."""
    first, last, steps = thirds(episodes)
    figures: dict[str, Any] = {"steps": steps, "episodes": len(episodes),
                               "tokens": sum(int(e.get("completion_tokens") or 0) for e in episodes),
                               "tokens_by_turn": tokens_by_turn(episodes)}
    for what in ("reward", "gate", "blank"):
        a, b = episode_values(first, what), episode_values(last, what)
        figures[what] = {"first_third": stats.bootstrap_mean(a), "last_third": stats.bootstrap_mean(b),
                         "rise": stats.difference_of_means(b, a)}
    return figures


def curves(episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per step: mean reward, gate pass, turn gain and the cumulative generated tokens."""
    rows, tokens = [], 0
    for step in sorted({e["step"] for e in episodes}):
        chosen = [e for e in episodes if e["step"] == step]
        tokens += sum(int(e.get("completion_tokens") or 0) for e in chosen)
        gains = turn_gains(chosen)
        rows.append({"step": step, "tokens": tokens,
                     "reward": mean([v for v in episode_values(chosen, "reward") if v is not None]),
                     "gate": mean([v for v in episode_values(chosen, "gate") if v is not None]),
                     "turn_gain": mean(gains) if gains else None})
    return rows


# --- reading runs and evals ----------------------------------------------------------------

def load_source(path: Path) -> dict[str, Any]:
    """A run directory or an eval directory, read without touching the model or the renderer."""
    path = Path(path)
    if (path / "eval.json").is_file():
        report = json.loads((path / "eval.json").read_text())
        return {"kind": "eval", "path": path, "name": path.name, "label": f"({report.get('policy', 'eval')})",
                "eval": report}
    if not (path / "episodes.jsonl").is_file():
        raise UsageError(f"{path} is neither a run directory (episodes.jsonl) nor an eval "
                         "directory (eval.json)")
    config = load_config(path / CONFIG) if (path / CONFIG).is_file() else None
    store = RunStore(path, path.name)
    name = (config and config.run_name) or path.name  # bench learn's arms are all called run/: their run_name differs
    return {"kind": "run", "path": path, "name": name, "label": _run_label(config), "config": config,
            "episodes": store.read_episodes(),
            "metrics": store.read_metrics()}


def _run_label(config: TrainConfig | None) -> str:
    """(turns, reward preset[, credit when not the episode's]); '?' for a run without its config.yaml."""
    if config is None:
        return "(turns ?, ?)"
    credit = "" if config.credit == "episode" else f", credit {config.credit}"
    return f"(turns {config.turns}, {config.reward_preset}{credit})"


def _band(values: list[float | None]) -> dict:
    return stats.bootstrap_mean(values, resamples=BAND_RESAMPLES)


def run_series(source: dict[str, Any]) -> dict[str, Any]:
    """Per step: x positions (step, wall seconds, tokens) and every plotted figure with its band."""
    episodes, metrics = source["episodes"], source["metrics"]
    seconds_by_step = {m["step"]: sum(float(m.get(k) or 0.0) for k in PHASES) for m in metrics if "step" in m}
    steps = sorted({e["step"] for e in episodes})
    turns = max((len(e["turns"]) for e in episodes), default=1)
    rows = []
    wall = tokens = 0.0
    for step in steps:
        chosen = [e for e in episodes if e["step"] == step]
        wall += seconds_by_step.get(step, 0.0)
        tokens += sum(int(e.get("completion_tokens") or 0) for e in chosen)
        row: dict[str, Any] = {"step": step, "wall_s": round(wall, 2), "tokens": int(tokens),
                               "reward": _band([e["reward"] for e in chosen])}
        for name in COMPONENTS:
            values = [(e.get("components") or {}).get(name) for e in chosen]
            if any(v is not None for v in values):
                row[name] = _band(values)
        for turn in range(1, turns + 1):
            seen = [e["turns"][turn - 1] for e in chosen if len(e["turns"]) >= turn
                    and not e["turns"][turn - 1].get("infrastructure_failed")]
            row[f"gate_turn_{turn}"] = _band([float(bool(t.get("passed"))) for t in seen])
            row[f"coverage_turn_{turn}"] = _band([t.get("paint_fraction") for t in seen])
        row["turn_gain"] = _band(turn_gains(chosen)) if turns > 1 else None
        rows.append(row)
    components = [name for name in COMPONENTS if any(name in r for r in rows)]
    return {"rows": rows, "turns": turns, "components": components, "summary": run_summary(episodes)}


def run_summary(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    figures = run_figures(episodes)
    figures["turn_gain"] = _band(turn_gains(episodes))
    return figures


X_AXES = (("step", "GRPO step"), ("wall_s", "wall time (s: generate + render + score + train)"),
          ("tokens", "generated tokens"))


def draw_reward(path: Path, runs: list[tuple[str, dict]]) -> Path:
    plt = pyplot()
    names = ["reward"] + [c for c in COMPONENTS if any(c in series["components"] for _, series in runs)]
    fig, axes = plt.subplots(len(names), len(X_AXES), figsize=(14, 3.0 * len(names)), dpi=90, squeeze=False)
    for row_index, name in enumerate(names):
        for column, (x_key, x_label) in enumerate(X_AXES):
            ax = axes[row_index][column]
            for label, series in runs:
                rows = [r for r in series["rows"] if r.get(name) is not None]
                if rows:
                    band(ax, [r[x_key] for r in rows], [r[name] for r in rows], label)
            ax.set_title(name if name == "reward" else f"component: {name}", fontsize=10)
            ax.set_xlabel(x_label, fontsize=8)
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("reward and components: per-step mean, 95 % bootstrap band over the step's episodes", fontsize=11)
    return save(fig, path)


def draw_turns(path: Path, runs: list[tuple[str, dict]]) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), dpi=90)
    for column, (key, title) in enumerate((("gate", "gate pass per turn"), ("coverage", "coverage per turn"))):
        ax = axes[column]
        for label, series in runs:
            for turn in range(1, series["turns"] + 1):
                rows = series["rows"]
                band(ax, [r["step"] for r in rows], [r.get(f"{key}_turn_{turn}") for r in rows], f"{label} turn {turn}")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("GRPO step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return save(fig, path)


def draw_turn_gain(path: Path, runs: list[tuple[str, dict]]) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), dpi=90)
    for column, (x_key, x_label) in enumerate((X_AXES[0], X_AXES[2])):
        ax = axes[column]
        for label, series in runs:
            rows = [r for r in series["rows"] if r.get("turn_gain") is not None]
            if rows:
                band(ax, [r[x_key] for r in rows], [r["turn_gain"] for r in rows], label)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_title("turn gain (final-turn minus turn-1 reward)", fontsize=10)
        ax.set_xlabel(x_label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return save(fig, path)


def draw_evals(path: Path, evals: list[tuple[str, dict]]) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=90)
    count = 2 * len(evals)
    position = 0
    for label, report in evals:
        for name, points in (("refine, turn k", report["refine"]["reward_by_turn"]),
                             ("independent, best of k", report["independent"]["best_of_k"])):
            offset = (position - (count - 1) / 2) * 0.06
            position += 1
            known = [(k, p) for k, p in enumerate(points, start=1) if p.get("estimate") is not None]
            ax.errorbar([k + offset for k, _ in known], [p["estimate"] for _, p in known],
                        yerr=[[p["estimate"] - p["low"] for _, p in known], [p["high"] - p["estimate"] for _, p in known]],
                        marker="o", capsize=3, label=f"{label}: {name}")
    ax.set_xlabel("turn k (refine) / samples k (independent)")
    ax.set_ylabel("held-out reward")
    ax.set_title("evals: reward by turn and best of k, 95 % intervals over slots", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return save(fig, path)


def contact_sheets(source: dict[str, Any]) -> list[tuple[str, Path]]:
    """The contact sheets of the run's first and last steps (the ones that exist)."""
    steps = sorted({e["step"] for e in source["episodes"]})
    chosen = sorted({steps[0], steps[-1]}) if steps else []
    found = []
    for step in chosen:
        sheet = source["path"] / "renders" / f"step-{step:05d}" / "contact_sheet.png"
        if sheet.is_file():
            found.append((f"step {step}", sheet))
    return found


def _img(path: Path, alt: str, width: str = "100%") -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}" style="max-width:{width}">'


def _cell(summary: dict | None) -> str:
    if not summary or summary.get("estimate") is None:
        return "–"
    return f"{summary['estimate']:+.3f} <small>({summary['low']:+.3f}..{summary['high']:+.3f})</small>"


def write_html(path: Path, runs: list[dict[str, Any]], evals: list[dict[str, Any]], plots: dict[str, Path]) -> Path:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>watercolour report</title>",
             "<style>body{font-family:sans-serif;margin:24px;background:#faf7f0;color:#222}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px}"
             "th{background:#eee}h2{margin-top:32px}.sheets{display:flex;gap:16px;flex-wrap:wrap}"
             ".sheets figure{margin:0;max-width:48%}</style></head><body>",
             "<h1>watercolour report</h1>",
             f"<p>{len(runs)} run(s), {len(evals)} eval(s). Intervals: 95 % bootstrap "
             "(scipy.stats.bootstrap, percentile) over episodes; rise = last third of the steps minus the first "
             "third.</p>"]
    if runs:
        parts.append("<table><tr><th>run</th><th>steps</th><th>episodes</th><th>tokens</th><th>reward first third</th>"
                     "<th>reward last third</th><th>reward rise</th><th>gate rise</th><th>blank-canvas rise</th>"
                     "<th>turn gain</th></tr>")
        for run in runs:
            s = run["series"]["summary"]
            parts.append(f"<tr><td>{html.escape(run['label'])}</td><td>{s['steps']}</td><td>{s['episodes']}</td>"
                         f"<td>{s['tokens']}</td><td>{_cell(s['reward']['first_third'])}</td>"
                         f"<td>{_cell(s['reward']['last_third'])}</td><td>{_cell(s['reward']['rise'])}</td>"
                         f"<td>{_cell(s['gate']['rise'])}</td><td>{_cell(s['blank']['rise'])}</td>"
                         f"<td>{_cell(s['turn_gain'])}</td></tr>")
        parts.append("</table>")
    if evals:
        parts.append("<h2>Evals</h2><table><tr><th>eval</th><th>final - turn 1</th><th>final - best of k</th>"
                     "<th>final - mean of k</th><th>gallery</th></tr>")
        for ev in evals:
            report = ev["eval"]
            gallery = ev["path"] / "gallery.html"
            link = f"<a href='{html.escape(gallery.resolve().as_uri())}'>gallery</a>" if gallery.is_file() else "–"
            parts.append(f"<tr><td>{html.escape(ev['label'])}</td><td>{_cell(report['final_minus_first'])}</td>"
                         f"<td>{_cell(report['final_minus_best_of_k'])}</td>"
                         f"<td>{_cell(report['final_minus_mean_of_k'])}</td><td>{link}</td></tr>")
        parts.append("</table>")
    for name, title in (("reward", "Reward and components by step, wall time and tokens"),
                        ("turns", "Gate pass and coverage per turn"), ("turn_gain", "Turn gain"),
                        ("eval", "Held-out evals")):
        if name in plots:
            parts.append(f"<h2>{title}</h2>{_img(plots[name], title)}")
    for run in runs:
        sheets = contact_sheets(run)
        if sheets:
            parts.append(f"<h2>Contact sheets: {html.escape(run['label'])}</h2><div class='sheets'>")
            for caption, sheet in sheets:
                parts.append(f"<figure>{_img(sheet, caption)}<figcaption>{html.escape(caption)}</figcaption></figure>")
            parts.append("</div>")
    parts.append("</body></html>")
    path.write_text("\n".join(parts))
    return path


def name_apart(sources: list[dict[str, Any]]) -> None:
    """Prefix each source's label with its name, widened to parent folders while two sources
    would read the same (two demo runs are both called run/: seed-0/run and seed-1/run)."""
    depth = {id(s): 1 for s in sources}

    def shown(source):
        parents = source["path"].resolve().parts[-depth[id(source)]:-1] if depth[id(source)] > 1 else ()
        return "/".join((*parents, source["name"])) + " " + source["label"]

    for _ in range(max((len(s["path"].resolve().parts) for s in sources), default=0)):
        seen: dict[str, list] = {}
        for source in sources:
            seen.setdefault(shown(source), []).append(source)
        clashing = [s for group in seen.values() if len(group) > 1 for s in group]
        if not clashing:
            break
        for source in clashing:
            depth[id(source)] += 1
    for source in sources:
        source["label"] = shown(source)


def build_report(paths: list[Path], out: Path) -> dict[str, Any]:
    sources = [load_source(Path(p)) for p in paths]
    name_apart(sources)
    runs = [s for s in sources if s["kind"] == "run"]
    evals = [s for s in sources if s["kind"] == "eval"]
    for run in runs:
        run["series"] = run_series(run)
    out.mkdir(parents=True, exist_ok=True)
    plots: dict[str, Path] = {}
    labelled = [(r["label"], r["series"]) for r in runs]
    if runs:
        plots["reward"] = draw_reward(out / "reward.png", labelled)
        plots["turns"] = draw_turns(out / "turns.png", labelled)
        if any(r["series"]["turns"] > 1 for r in runs):
            plots["turn_gain"] = draw_turn_gain(out / "turn_gain.png", labelled)
    if evals:
        plots["eval"] = draw_evals(out / "eval.png", [(e["label"], e["eval"]) for e in evals])
    page = write_html(out / "index.html", runs, evals, plots)
    numbers = {"runs": [{"path": str(r["path"]), "label": r["label"], **r["series"]} for r in runs],
               "evals": [{"path": str(e["path"]), "label": e["label"],
                          **{k: e["eval"][k] for k in ("final_minus_first", "final_minus_best_of_k",
                                                       "final_minus_mean_of_k", "refine", "independent")}}
                         for e in evals],
               "plots": {k: str(v) for k, v in plots.items()}, "html": str(page)}
    (out / "report.json").write_text(json.dumps(numbers, indent=2) + "\n")
    return numbers
