"""`watercolour replay RUN_DIR`: check, summarise, re-score, export and continue a recorded run.

Without options it prints the statistics a researcher asks for first: reward, gate pass rate,
coverage, shapes and fill calls by turn index. ``--verify`` re-renders every recorded turn
from its reply and seed with the run's backend and counts byte-identical PNGs (a mismatch is
a bug: rendering must be deterministic). ``--gallery`` writes a self-contained HTML gallery,
``--rescore`` (rescore.py), ``--export`` (export.py) and ``--continue-from`` (continuation.py)
live in their own modules.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from env.errors import UsageError
from multiturn_trainer.config import TrainConfig, load_config
from multiturn_trainer.store import CONFIG, RunStore


def load_run(run_dir: str | Path) -> tuple[RunStore, TrainConfig, list[dict[str, Any]]]:
    """The run's store, its config (TrainConfig's parser: keys a run predates take their
    defaults) and its episodes."""
    root = Path(run_dir)
    if not (root / CONFIG).is_file():
        raise UsageError(f"{root} is not a run directory (no {CONFIG})")
    config = load_config(root / CONFIG)
    store = RunStore(root, config.run_name or root.name)
    episodes = store.read_episodes()
    if not episodes:
        raise UsageError(f"{root} has no recorded episodes")
    return store, config, episodes


def verify(store: RunStore, config: TrainConfig, episodes: list[dict[str, Any]], evaluator=None) -> dict[str, int]:
    """Re-apply every turn's reply to its episode's sketch (edit replies change the sketch the
    environment held) and re-render every rendered turn; counts of identical, different and
    missing PNGs, and of turns whose resulting sketch differs from the recorded ``code``."""
    from env.core import SketchEvaluator, combine, gate_turn
    from env.turn import EpisodeSketch

    own = evaluator is None
    if own:
        kwargs = {"backend": config.render_backend} if config.render_backend else {}
        evaluator = SketchEvaluator(deadline_s=config.render_deadline_s, **kwargs)
    counts = {"identical": 0, "different": 0, "missing": 0, "code_different": 0}
    sketches = [EpisodeSketch() for _ in episodes]
    try:
        # Turn k of every episode at once (the renders run in parallel), in turn order, since
        # an edit applies to the sketch the turns before it left.
        for position in range(max(len(episode["turns"]) for episode in episodes)):
            jobs = [(i, episode["turns"][position]) for i, episode in enumerate(episodes)
                    if position < len(episode["turns"])]
            rendered = [(i, turn) for i, turn in jobs if turn.get("png")]
            outcomes = dict(zip([i for i, _ in rendered], evaluator.evaluate_many(
                [turn["reply"] for _, turn in rendered], [int(episodes[i]["seed"]) for i, _ in rendered],
                currents=[sketches[i].current for i, _ in rendered])))
            for i, turn in jobs:
                episode = episodes[i]
                outcome = outcomes.get(i)
                if outcome is None:  # not rendered when recorded: the static gate alone says what it left
                    outcome = combine(gate_turn(turn["reply"], sketches[i].current, evaluator.contract), None)
                code, _ = sketches[i].advance(turn["reply"], outcome)
                where = f"{episode['episode_id']} turn {turn['turn']}"
                if "code" in turn and code != turn["code"]:
                    counts["code_different"] += 1
                    print(f"  code different: {where}", file=sys.stderr)
                if not turn.get("png"):
                    continue
                recorded = store.root / turn["png"]
                if not recorded.is_file() or outcome.png is None:
                    counts["missing"] += 1
                    print(f"  missing: {where}", file=sys.stderr)
                elif recorded.read_bytes() == outcome.png:
                    counts["identical"] += 1
                else:
                    counts["different"] += 1
                    print(f"  different: {where} ({turn['png']})", file=sys.stderr)
    finally:
        if own:
            evaluator.close()
    return counts


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def write_html_gallery(store: RunStore, episodes: list[dict[str, Any]], out: str | Path) -> Path:
    """A self-contained HTML gallery (paintings embedded), step → group → episode, turns side by side.

    Each turn shows its painting, gate result, reward components, the feedback the policy saw
    next, and the diff of the code against the previous turn. Opens offline from the file system.
    """
    import base64
    import difflib
    import html

    def esc(value: Any) -> str:
        return html.escape(str(value))

    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for episode in episodes:
        by_step[episode["step"]].append(episode)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>watercolour run " + esc(store.run) + "</title>",
        "<style>body{font-family:sans-serif;background:#f6f2ea;color:#282420;margin:1em}"
        ".episode{border-top:1px solid #ccc;padding:.5em 0}.turns{display:flex;gap:1em;overflow-x:auto}"
        ".turn{flex:0 0 300px}.turn img{width:300px;height:300px;background:#ddd}"
        "pre{white-space:pre-wrap;font-size:11px;max-height:14em;overflow:auto;background:#fff;padding:.3em}"
        "nav a{margin-right:.6em}</style></head><body>",
        f"<h1>{esc(store.run)}</h1><nav>" + "".join(f"<a href='#step-{s}'>step {s}</a>" for s in sorted(by_step)) + "</nav>",
        # The slider shows one step at a time (steps are listed in order); "all" shows every step.
        f"<p><label>step <input id='step-slider' type='range' min='0' max='{len(by_step) - 1}' value='0'></label>"
        " <output id='step-shown'>all</output> <button id='show-all'>all</button></p>",
    ]
    for step in sorted(by_step):
        parts.append(f"<section class='step' id='step-{step}'><h2>step {step}</h2>")
        for episode in sorted(by_step[step], key=lambda e: (e["group"], e["index"])):
            parts.append(
                f"<div class='episode' data-episode='{esc(episode['episode_id'])}'><h3>group {episode['group']} · "
                f"episode {episode['index']} · {esc(episode['subject'])} · reward {_fmt(episode['reward'])}</h3>"
                f"<div class='turns'>"
            )
            previous = ""
            for turn in episode["turns"]:
                image = "<div class='missing'>no painting</div>"
                if turn.get("png") and (store.root / turn["png"]).is_file():
                    data = base64.b64encode((store.root / turn["png"]).read_bytes()).decode("ascii")
                    image = f"<img alt='turn {turn['turn']}' src='data:image/png;base64,{data}'>"
                code = turn.get("code") or ""
                diff = "\n".join(difflib.unified_diff(previous.splitlines(), code.splitlines(), "previous", "this",
                                                      lineterm="", n=1)) if previous else code
                components = ", ".join(f"{k} {_fmt(v)}" for k, v in (turn.get("components") or {}).items())
                # An edit reply is not the sketch: show what the policy sent beside what it made.
                sent = turn.get("reply") or ""
                reply = ("" if not sent or code in sent else
                         f"<details><summary>reply (edits)</summary><pre>{esc(sent)}</pre></details>")
                parts.append(
                    f"<div class='turn'><b>turn {turn['turn']}</b> · {'passed' if turn['passed'] else 'failed'}"
                    f" {esc(' '.join(turn['violations']))}<br>{image}<br>reward {_fmt(turn.get('reward'))}"
                    f" <small>{esc(components)}</small><details><summary>feedback</summary>"
                    f"<pre>{esc(turn.get('feedback', ''))}</pre></details>{reply}<details><summary>code"
                    f"{' diff' if previous else ''}</summary><pre>{esc(diff)}</pre></details></div>"
                )
                previous = code
            parts.append("</div></div>")
        parts.append("</section>")
    parts.append(
        "<script>(()=>{const steps=[...document.querySelectorAll('section.step')];"
        "const slider=document.getElementById('step-slider'),shown=document.getElementById('step-shown');"
        "const show=i=>{steps.forEach((s,j)=>{s.hidden=i!==null&&i!==j;});"
        "shown.textContent=i===null?'all':steps[i].id.replace('-',' ');};"
        "slider.addEventListener('input',()=>show(Number(slider.value)));"
        "document.getElementById('show-all').addEventListener('click',()=>show(null));})();</script>"
    )
    parts.append("</body></html>")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(parts), encoding="utf-8")
    return out


def sheet_episode(episodes: list[dict[str, Any]], episode_id: str | None = None) -> dict[str, Any]:
    """The episode ``episode_id``, or by default the one whose last turn gained most on its first
    (the sheet is for showing a revision; the choice is printed, so it is never passed off as typical)."""
    if episode_id is not None:
        for episode in episodes:
            if episode["episode_id"] == episode_id:
                return episode
        raise UsageError(f"no episode {episode_id!r} in this run (ids look like {episodes[0]['episode_id']!r})")

    def gain(episode: dict[str, Any]) -> float:
        rewards = [turn.get("reward") for turn in episode["turns"]]
        if len(rewards) < 2 or rewards[0] is None or rewards[-1] is None:
            return float("-inf")
        return rewards[-1] - rewards[0]

    return max(episodes, key=gain)


def _sheet_code(turn: dict[str, Any]) -> str:
    """What a sheet shows of a turn's code: an edit reply as sent (the edits are the revision),
    else the sketch from its draw() on (the set-up above it is the same in every sketch)."""
    code, reply = turn.get("code") or "", turn.get("reply") or ""
    if reply and code not in reply:
        return reply
    start = code.find("function draw")
    return code[start:] if start >= 0 else code


def write_episode_sheet(store: RunStore, episodes: list[dict[str, Any]], out: str | Path,
                        episode_id: str | None = None) -> tuple[Path, dict[str, Any]]:
    """A PNG of one episode's turns side by side: painting, sketch and the feedback read next."""
    from env.contact_sheet import TurnPanel, episode_sheet

    episode = sheet_episode(episodes, episode_id)
    panels = []
    for turn in episode["turns"]:
        path = store.root / turn["png"] if turn.get("png") else None
        verdict = "passed" if turn["passed"] else "failed " + " ".join(turn["violations"][:3])
        panels.append(TurnPanel(heading=f"turn {turn['turn']} · {verdict} · reward {_fmt(turn.get('reward'))}",
                                png=path.read_bytes() if path is not None and path.is_file() else None,
                                code=_sheet_code(turn), feedback=turn.get("feedback") or ""))
    title = (f"{store.run} · step {episode['step']} · episode {episode['episode_id']} · {episode['subject']} · "
             f"reward {_fmt(episode['reward'])}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(episode_sheet(panels, title))
    return out, episode
