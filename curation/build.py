"""`watercolour pool build`: gather candidate paintings for a subject and stage them for rating.

Candidates come from a folder of sketches (or raw model replies), a training run's episodes,
a local policy (HF generate) or an OpenAI-compatible endpoint; the last two are one-turn
episodes of the project's episode runner (``multiturn_trainer.rollout``), the policies those
of ``agent.policies``, recorded as run directories in ``POOL/runs/``. Sketches are rendered and
gated with the project's renderer; those that pass are staged in the pool with tier
``candidate`` (their coverage and, with ``--hps-url``, their HPSv3 score alongside), ready for
`watercolour pool serve`. Duplicate paintings (same PNG bytes) are staged once.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from env.errors import UsageError
from rewards.pool import CANDIDATE, locked_pool

SKETCH_SUFFIXES = (".js", ".txt", ".md")
# Where a build's generated episodes are recorded, inside the pool folder (the manifest lists the
# paintings; the folder keeps what made them).
RUNS = "runs"


@dataclass
class Candidate:
    name: str
    subject: str
    code: str
    generator: str
    seed: int = 1
    png: bytes | None = None  # known already (a run's recorded painting) or rendered here
    paint_fraction: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    gate_failed: list[str] | None = None  # reason codes, when it was gated already and failed


@dataclass
class BuildReport:
    staged: list[str] = field(default_factory=list)
    duplicates: int = 0
    failed: dict[str, list[str]] = field(default_factory=dict)  # name -> reason codes

    def line(self, pool_dir: Path) -> str:
        reasons: dict[str, int] = {}
        for codes in self.failed.values():
            for code in codes or ["no_painting"]:
                reasons[code] = reasons.get(code, 0) + 1
        why = ", ".join(f"{code} {count}" for code, count in sorted(reasons.items()))
        return (f"pool build: staged {len(self.staged)} candidates in {pool_dir}, {self.duplicates} duplicates skipped, "
                f"{len(self.failed)} failed the gate" + (f" ({why})" if why else ""))


def slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit] or "sketch"


def from_folder(folder: Path, subject: str, seed: int) -> list[Candidate]:
    files = sorted(p for p in folder.iterdir() if p.suffix in SKETCH_SUFFIXES and p.is_file())
    if not files:
        raise UsageError(f"no sketches ({', '.join(SKETCH_SUFFIXES)}) in {folder}")
    return [Candidate(name=slug(p.stem), subject=subject, code=p.read_text(encoding="utf-8", errors="replace"),
                      generator=f"folder {folder.name}", seed=seed, extra={"origin": str(p)}) for p in files]


def from_run(run_dir: Path, subject: str | None) -> list[Candidate]:
    """Every turn of the run that rendered and passed the gate, with its recorded painting."""
    from multiturn_trainer.store import RunStore

    episodes = RunStore(run_dir, run_dir.name).read_episodes()
    if subject:
        episodes = [e for e in episodes if e["subject"] == subject]
        if not episodes:
            raise UsageError(f"no episode of {run_dir} paints {subject!r}")
    found = []
    for episode in episodes:
        for turn in episode["turns"]:
            if turn.get("png") and turn.get("passed") and (run_dir / turn["png"]).is_file():
                found.append(Candidate(
                    name=f"{slug(run_dir.name, 20)}-{episode['episode_id']}-t{turn['turn']}", subject=episode["subject"],
                    code=turn.get("code") or "", generator=f"run {run_dir.name} step {episode['step']}",
                    seed=int(episode["seed"]), png=(run_dir / turn["png"]).read_bytes(),
                    paint_fraction=turn.get("paint_fraction"),
                    extra={"origin": f"{run_dir}:{episode['episode_id']}:t{turn['turn']}",
                           "episode_reward": episode.get("reward")},
                ))
    return found


def from_policy(model_dir: str, subject: str, count: int, seed: int, max_new_tokens: int, temperature: float,
                runs_dir: Path, backend: str | None = None, deadline_s: float = 90.0) -> list[Candidate]:
    """Fresh turn-1 sketches from a local model (the same prompt the trainer uses)."""
    from agent.policies import LocalModelPolicy
    from multiturn_trainer.families import family_of
    from multiturn_trainer.tiny_model import load_pretrained

    model, processor = load_pretrained(model_dir)
    model.eval()
    family = family_of(model)
    policy = LocalModelPolicy(model, processor, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
                              sees_images=family.sees_images, image_pad_token=family.image_pad_token)
    return generated(policy, subject, count, seed, f"policy {model_dir}", slug(Path(model_dir).name, 20),
                     runs_dir, dict(model=model_dir, max_completion_length=max_new_tokens, temperature=temperature),
                     backend, deadline_s)


def from_endpoint(url: str, model: str, subject: str, count: int, seed: int, max_tokens: int,
                  temperature: float, runs_dir: Path, token: str | None = None, backend: str | None = None,
                  deadline_s: float = 90.0) -> list[Candidate]:
    """Fresh sketches from an OpenAI-compatible chat-completions server (token: the argument,
    else $WATERCOLOUR_ENDPOINT_TOKEN or $OPENAI_API_KEY)."""
    from agent.policies import EndpointPolicy

    policy = EndpointPolicy(url, model, max_tokens=max_tokens, temperature=temperature, token=token, seed=seed)
    return generated(policy, subject, count, seed, f"endpoint {model}", slug(model, 20), runs_dir,
                     dict(model=f"{model} at {url}", max_completion_length=max_tokens, temperature=temperature),
                     backend, deadline_s)


def generated(policy, subject: str, count: int, seed: int, generator: str, tag: str, runs_dir: Path,
              settings: dict[str, Any], backend: str | None, deadline_s: float) -> list[Candidate]:
    """``count`` one-turn episodes of ``policy`` through the episode runner (render seeds
    seed, seed+1, ...), recorded as a run directory under ``runs_dir`` like any other run's
    (`watercolour replay` reads and re-renders it), so every candidate's ``origin`` names its
    episode. Their paintings are gated already; a failed one keeps its reasons."""
    from agent.messages import first_turn_messages
    from multiturn_trainer.config import TrainConfig
    from multiturn_trainer.env_backends import InProcessEnvironments
    from multiturn_trainer.rollout import EpisodeRunner, run_into_store
    from multiturn_trainer.store import RunStore

    run_dir = runs_dir / f"{tag}-s{seed}"
    while run_dir.exists():  # a second build with the same source and seed: its own run directory
        run_dir = run_dir.with_name(run_dir.name + "_")
    config = TrainConfig(turns=1, subjects=[subject], seed=seed, render_backend=backend, render_deadline_s=deadline_s,
                         output_dir=str(run_dir), report_to="none", **settings)
    store = RunStore(run_dir, config.name)
    store.write_config(config.to_yaml())
    rows = [{"prompt": first_turn_messages(subject), "subject": subject, "seed": seed + i} for i in range(count)]
    environments = InProcessEnvironments(deadline_s=deadline_s, **({"backend": backend} if backend else {}))
    try:
        batch, records = run_into_store(EpisodeRunner(None, environments, turns=1), policy, rows,
                                        [(1, 0, i) for i in range(count)], store)
    finally:
        environments.close()
    found = []
    for i, (episode, record) in enumerate(zip(batch.episodes, records)):
        [observation] = episode.observations
        passed = observation.passed and observation.png is not None
        found.append(Candidate(
            name=f"{slug(subject)}-{tag}-{seed + i}", subject=subject, code=observation.code or episode.replies[0],
            generator=generator, seed=seed + i, png=observation.png if passed else None,
            paint_fraction=observation.paint_fraction if passed else None,
            extra={"origin": f"{run_dir}:{record['episode_id']}:t1"},
            gate_failed=None if passed else list(observation.violations) or ["no_painting"],
        ))
    return found


def render_candidates(candidates: list[Candidate], report: BuildReport, backend: str | None = None,
                      deadline_s: float = 90.0) -> list[Candidate]:
    """Render and gate those without a painting; keep the ones that pass."""
    from env.core import SketchEvaluator

    for candidate in candidates:
        if candidate.gate_failed is not None:
            report.failed[candidate.name] = candidate.gate_failed
    todo = [c for c in candidates if c.png is None and c.gate_failed is None]
    if todo:
        kwargs = {"backend": backend} if backend else {}
        with SketchEvaluator(deadline_s=deadline_s, **kwargs) as evaluator:
            outcomes = evaluator.evaluate_many([c.code for c in todo], [c.seed for c in todo])
        for candidate, outcome in zip(todo, outcomes):
            if outcome.passed and outcome.png is not None:
                candidate.png, candidate.paint_fraction = outcome.png, outcome.paint_fraction
                candidate.code = outcome.code or candidate.code
            else:
                report.failed[candidate.name] = list(outcome.violations)
    return [c for c in candidates if c.png is not None and c.name not in report.failed]


def score_hps(candidates: list[Candidate], hps_url: str) -> None:
    from rewards.hps_client import HPSv3Client

    scores = asyncio.run(HPSv3Client(hps_url).score([c.png for c in candidates], [c.subject for c in candidates]))
    for candidate, score in zip(candidates, scores):
        candidate.extra["hpsv3"] = score  # None when the scorer failed for this painting


def stage(pool_dir: Path, candidates: list[Candidate], report: BuildReport) -> None:
    with locked_pool(pool_dir) as pool:
        seen = {e.extra.get("sha256") for e in pool.entries()}
        taken = {e.id for e in pool.entries()}
        for candidate in candidates:
            digest = hashlib.sha256(candidate.png).hexdigest()
            if digest in seen:
                report.duplicates += 1
                continue
            seen.add(digest)
            name = candidate.name
            while name in taken:
                name += "_"
            taken.add(name)
            pool.add(candidate.png, CANDIDATE, name, subject=candidate.subject, source=candidate.code,
                     generator=candidate.generator,
                     paint_coverage=None if candidate.paint_fraction is None else round(candidate.paint_fraction, 4),
                     sha256=digest, seed=candidate.seed, **candidate.extra)
            report.staged.append(name)


def build(args) -> BuildReport:
    pool_dir = Path(args.pool or f"pools/{slug(args.subject or 'candidates')}")
    sources = [bool(args.source), bool(args.policy), bool(args.endpoint)]
    if sum(sources) != 1:
        raise UsageError("give exactly one of --from DIR|RUN_DIR, --policy MODEL, --endpoint URL")
    if not args.subject and not (args.source and (Path(args.source) / "episodes.jsonl").is_file()):
        raise UsageError("--subject is required (except --from RUN_DIR, whose episodes name theirs)")
    if args.source:
        source = Path(args.source)
        if not source.is_dir():
            raise UsageError(f"{source} is not a folder")
        found = from_run(source, args.subject) if (source / "episodes.jsonl").is_file() else \
            from_folder(source, args.subject, args.seed)
    elif args.policy:
        found = from_policy(args.policy, args.subject, args.count, args.seed, args.max_tokens, args.temperature,
                            pool_dir / RUNS, args.backend, args.deadline)
    else:
        found = from_endpoint(args.endpoint, args.endpoint_model, args.subject, args.count, args.seed,
                              args.max_tokens, args.temperature, pool_dir / RUNS, args.token, args.backend,
                              args.deadline)
    report = BuildReport()
    passed = render_candidates(found, report, args.backend, args.deadline)
    if args.hps_url and passed:
        score_hps(passed, args.hps_url)
    stage(pool_dir, passed, report)
    print(report.line(pool_dir))
    return report
