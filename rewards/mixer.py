"""The reward mix: components, presets, and one scorer for the final painting of an episode.

    total = gate passed ? Σ weight[c] · c  :  0          (c = 1 for the gate itself)

Any component with a non-zero weight that comes back ``None`` (its infrastructure failed)
makes the total ``None``: the trainer drops that rollout instead of scoring it 0.0. A failed
gate is the policy's fault and scores 0 without asking the judge or HPSv3.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Protocol

import yaml

from env.errors import UsageError
from env.files import DATA_ROOT
from rewards.components import LengthRamp, gate_score

COMPONENTS = ("gate", "length", "judge", "hpsv3", "style")
PRESET_DIR = DATA_ROOT / "configs" / "rewards"
# The mix `score` and `train` use unless told otherwise: it needs no GPU and no server.
DEFAULT_PRESET = "style-offline"


@dataclass(frozen=True)
class RewardMix:
    name: str
    weights: dict[str, float]
    gate_zeroes_total: bool = True
    length: LengthRamp = field(default_factory=LengthRamp)

    def __post_init__(self):
        unknown = set(self.weights) - set(COMPONENTS)
        if unknown:
            raise ValueError(f"unknown reward components {sorted(unknown)}; known: {COMPONENTS}")
        if any(w < 0 for w in self.weights.values()):
            raise ValueError("reward weights must be non-negative")

    def weight(self, component: str) -> float:
        return float(self.weights.get(component, 0.0))

    def uses(self, component: str) -> bool:
        return self.weight(component) > 0

    @classmethod
    def from_mapping(cls, mapping: dict[str, Any]) -> "RewardMix":
        return cls(
            name=str(mapping.get("name", "custom")),
            weights={k: float(v) for k, v in dict(mapping["weights"]).items()},
            gate_zeroes_total=bool(mapping.get("gate_zeroes_total", True)),
            length=LengthRamp.from_mapping(mapping.get("length")),
        )


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_preset(name_or_path: str | Path) -> RewardMix:
    """A preset by name (configs/rewards/NAME.yaml) or a YAML file path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = PRESET_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise ValueError(f"no reward preset {name_or_path!r}; presets: {', '.join(preset_names())}")
    return RewardMix.from_mapping(yaml.safe_load(path.read_text()))


def mix_total(components: dict[str, float | None], mix: RewardMix) -> float | None:
    if mix.gate_zeroes_total and components.get("gate") == 0.0:
        return 0.0
    total = 0.0
    for name in COMPONENTS:
        weight = mix.weight(name)
        if weight == 0:
            continue
        value = components.get(name)
        if value is None:
            return None
        total += weight * value
    return total


@dataclass
class ScoreResult:
    total: float | None
    components: dict[str, float | None]
    references: list[str] = field(default_factory=list)

    def as_record(self) -> dict[str, Any]:
        return {"total": self.total, "components": self.components}


class ImageScorer(Protocol):
    """HPSv3 and style both reduce to this: PNGs (+ subjects) in, a score or None each."""

    async def __call__(self, pngs: list[bytes], subjects: list[str]) -> list[float | None]: ...


@dataclass
class PaintingToScore:
    png: bytes | None
    code: str | None
    passed: bool
    subject: str = ""
    group_seed: int = 0  # every episode of a GRPO group faces the same judge references


class RewardScorer:
    """Scores final paintings with one mix. Scorers for unused components may be None."""

    def __init__(
        self,
        mix: RewardMix,
        *,
        judge=None,
        pool=None,
        hps: ImageScorer | None = None,
        style: ImageScorer | None = None,
        tokenizer: Callable[[str], list] | None = None,
        judge_references: tuple[int, int] = (2, 2),
    ):
        missing = [name for name, scorer in (("judge", judge), ("hpsv3", hps), ("style", style)) if mix.uses(name) and scorer is None]
        if mix.uses("judge") and pool is None:
            missing.append("pool (for the judge's references)")
        if missing:
            raise ValueError(f"reward mix {mix.name!r} needs: {', '.join(missing)}")
        self.mix = mix
        self.judge = judge
        self.pool = pool
        self.hps = hps
        self.style = style
        self.tokenizer = tokenizer
        self.judge_references = judge_references

    async def score_many(self, paintings: list[PaintingToScore]) -> list[ScoreResult]:
        results = [self._cheap_components(p) for p in paintings]
        live = [i for i, r in enumerate(results) if not (self.mix.gate_zeroes_total and r.components["gate"] == 0.0)]
        live_paintings = [paintings[i] for i in live]
        tasks: list[Awaitable] = []
        if self.mix.uses("hpsv3"):
            tasks.append(self._image_component("hpsv3", self.hps, live_paintings, live, results))
        if self.mix.uses("style"):
            tasks.append(self._image_component("style", self.style, live_paintings, live, results))
        if self.mix.uses("judge"):
            tasks.append(self._judge_component(live_paintings, live, results))
        await asyncio.gather(*tasks)
        for result in results:
            result.total = mix_total(result.components, self.mix)
        return results

    def score_many_sync(self, paintings: list[PaintingToScore]) -> list[ScoreResult]:
        return asyncio.run(self.score_many(paintings))

    def _cheap_components(self, painting: PaintingToScore) -> ScoreResult:
        passed = painting.passed and painting.png is not None
        return ScoreResult(total=None, components={
            "gate": gate_score(passed),
            "length": self.mix.length.score(painting.code, self.tokenizer),
        })

    async def _image_component(self, name, scorer: ImageScorer, paintings, indices, results) -> None:
        if not paintings:
            return
        try:
            scores = await scorer([p.png for p in paintings], [p.subject for p in paintings])
        except Exception as exc:  # noqa: BLE001 - a scorer crash is an infrastructure failure: None
            if _is_fatal(exc):
                raise
            scores = [None] * len(paintings)
        for index, score in zip(indices, scores):
            results[index].components[name] = score

    async def _judge_component(self, paintings, indices, results) -> None:
        love, okay = self.judge_references

        async def one(painting: PaintingToScore, result: ScoreResult):
            references = self.pool.draw(painting.group_seed, love=love, okay=okay, subject=painting.subject or None)
            result.references = [r.id for r in references]
            try:
                verdict = await self.judge.score(painting.png, references, subject=painting.subject)
                result.components["judge"] = verdict.score
            except Exception as exc:  # noqa: BLE001
                if _is_fatal(exc):
                    raise
                result.components["judge"] = None

        await asyncio.gather(*(one(p, results[i]) for p, i in zip(paintings, indices)))


def _is_fatal(exc: BaseException) -> bool:
    from rewards.http_retry import FatalScorerError

    return isinstance(exc, FatalScorerError)


def style_image_scorer(style_scorer) -> ImageScorer:
    """Adapt rewards.style.StyleScorer (sync, CPU) to the ImageScorer shape."""

    async def score(pngs: list[bytes], subjects: list[str]) -> list[float | None]:
        return await asyncio.to_thread(lambda: [style_scorer.score(png) for png in pngs])

    return score


def build_scorer(preset: str | Path, pool, *, judge_url: str | None = None, judge_model: str | None = None,
                 hps_url: str | None = None, judge_probability: bool = False) -> RewardScorer:
    """The scorer for a preset (a name in configs/rewards or a YAML path) over ``pool``.

    Only the components the mix uses are built: the style statistics of the pool's love tier,
    an HPSv3 client for ``hps_url``, an HTTP judge (``judge_url``/``judge_model`` override
    ``JudgeConfig``'s defaults; ``judge_probability`` scores a soft P(A) from the verdict token's
    log-probabilities instead of the hard verdict). Used by `watercolour score`, the trainer and
    `replay --rescore`.
    """
    mix = load_preset(preset)
    style = hps = judge = None
    if mix.uses("style"):
        from rewards.style import StyleScorer

        style = style_image_scorer(StyleScorer.from_pool_dir(pool.root))
    if mix.uses("hpsv3"):
        if not hps_url:
            raise UsageError(f"preset {mix.name!r} needs HPSv3: pass --hps-url "
                             "(an HPSv3 scorer server, e.g. `watercolour hps-serve` on a GPU machine)")
        from rewards.hps_client import HPSv3Client

        hps = HPSv3Client(hps_url).score  # async (pngs, subjects) -> scores, as RewardScorer calls it

    if mix.uses("judge"):
        from rewards.judge import HttpJudge, JudgeConfig

        config = JudgeConfig()
        overrides = {k: v for k, v in (("base_url", judge_url), ("model", judge_model),
                                       ("probability_mode", judge_probability)) if v}
        judge = HttpJudge(JudgeConfig(**{**config.__dict__, **overrides}))
    return RewardScorer(mix, judge=judge, pool=pool, hps=hps, style=style)
