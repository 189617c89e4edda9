"""What a reference pool holds, how to publish it, and how consistent the judge is on it.

* ``pool_statistics``: paintings per tier and subject, their paint coverage, and whether the
  judge can draw its references (2 love + 2 okay per GRPO group, see ``ReferencePool.draw``).
* ``export_pool``: the pool as an imagefolder dataset with the public pool's columns, readable
  by ``datasets.load_dataset("imagefolder", ...)`` and by ``import_imagefolder``.
* ``judge_consistency``: the pool's own paintings as candidates against references from the
  rest of the pool. Does the judge repeat its verdicts, pick the same painting in both orders,
  and give a candidate a similar score against a different draw of references?
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import statistics
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from multiturn_trainer.evaluation_stats import mean
from rewards.judge import HttpJudge, JudgeConfig, JudgeResult, OrderVerdict, VerdictCache, verdict_cache_key
from rewards.ranking import spearman
from rewards.pool import CANDIDATE, RATED_TIERS, TIERS, PoolEntry, Reference, ReferencePool

# (love, okay) references per GRPO group: RewardScorer's default `judge_references`.
JUDGE_REFERENCES = (2, 2)
COVERAGE_BINS = 10
METADATA = "metadata.jsonl"
DEFAULT_EXPORT_TIERS = ("love", "okay")


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


def _summary(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"count": 0, "min": None, "median": None, "max": None}
    return {"count": len(values), "min": min(values), "median": statistics.median(values), "max": max(values)}


def coverage_histogram(values: Sequence[float], bins: int = COVERAGE_BINS) -> dict[str, list]:
    """Counts in equal bins over [0, 1]; 1.0 falls in the last bin, as the fraction of a fully
    painted canvas should."""
    counts = [0] * bins
    for value in values:
        counts[min(bins - 1, max(0, int(value * bins)))] += 1
    return {"edges": [round(i / bins, 10) for i in range(bins + 1)], "counts": counts}


def pool_statistics(pool: ReferencePool, references: tuple[int, int] = JUDGE_REFERENCES) -> dict[str, Any]:
    """Counts, coverage and reference availability of a pool, as a JSON-ready dict.

    ``references`` is what the judge draws per group, (love, okay). A subject has an *own*
    full draw when its own paintings cover it; *with top-up* when the whole tier does, since
    ``ReferencePool.draw`` tops up from the tier when a subject is short.
    """
    love_needed, okay_needed = references
    entries = pool.entries()
    subjects = sorted({e.subject for e in entries})
    tier_totals = pool.counts()
    coverage = [e.paint_coverage for e in entries if e.paint_coverage is not None]

    per_subject: dict[str, dict[str, Any]] = {}
    for subject in subjects:
        love, okay = len(pool.entries("love", subject)), len(pool.entries("okay", subject))
        per_subject[subject] = {
            "love": love,
            "okay": okay,
            "own_full_draw": love >= love_needed and okay >= okay_needed,
            "full_draw_with_top_up": tier_totals["love"] >= love_needed and tier_totals["okay"] >= okay_needed,
        }
    return {
        "pool": str(pool.root),
        "paintings": len(entries),
        "tiers": tier_totals,
        "subjects": {s: {t: len(pool.entries(t, s)) for t in TIERS} for s in subjects},
        # The raw values, as earlier versions of `pool stats --json` printed them.
        "coverage": coverage,
        "coverage_summary": {
            **_summary(coverage),
            "missing": len(entries) - len(coverage),
            "histogram": coverage_histogram(coverage),
            "by_tier": {t: _summary([e.paint_coverage for e in pool.entries(t) if e.paint_coverage is not None])
                        for t in TIERS},
        },
        "judge_references": {
            "per_draw": {"love": love_needed, "okay": okay_needed},
            "love": tier_totals["love"],
            "okay": tier_totals["okay"],
            "full_draw": tier_totals["love"] >= love_needed and tier_totals["okay"] >= okay_needed,
            "subjects_with_own_full_draw": sum(s["own_full_draw"] for s in per_subject.values()),
            "subjects": per_subject,
        },
    }


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def format_statistics(stats: dict[str, Any]) -> str:
    tiers = stats["tiers"]
    lines = [
        f"{stats['pool']}: {stats['paintings']} paintings ("
        + ", ".join(f"{t} {tiers[t]}" for t in TIERS) + f") across {len(stats['subjects'])} subjects"
    ]
    cover = stats["coverage_summary"]
    lines.append(f"paint coverage ({cover['count']} known, {cover['missing']} missing): "
                 f"min {_number(cover['min'])}  median {_number(cover['median'])}  max {_number(cover['max'])}")
    edges, counts = cover["histogram"]["edges"], cover["histogram"]["counts"]
    widest = max(counts) if counts and max(counts) else 1
    for low, high, count in zip(edges, edges[1:], counts):
        bar = "#" * round(30 * count / widest)
        lines.append(f"  {low:.1f}-{high:.1f} | {bar} {count}" if count else f"  {low:.1f}-{high:.1f} |")
    refs = stats["judge_references"]
    need = refs["per_draw"]
    lines.append(
        f"judge references ({need['love']} love + {need['okay']} okay per group): love {refs['love']}, "
        f"okay {refs['okay']}: " + ("a full draw is possible" if refs["full_draw"] else "NOT ENOUGH for a full draw")
    )
    subjects = refs["subjects"]
    lines.append(f"  {refs['subjects_with_own_full_draw']} of {len(subjects)} subjects draw fully from their own "
                 "paintings" + ("; the others top up from the whole tier" if refs["full_draw"] else ""))
    if subjects:
        width = min(48, max(len("subject"), *(len(s or "(none)") for s in subjects)))
        header = f"  {'subject':<{width}}  " + " ".join(f"{t:>9}" for t in TIERS) + "  draw"
        lines.append(header)
        for subject, row in stats["subjects"].items():
            reference = subjects[subject]
            draw = ("own" if reference["own_full_draw"] else
                    "top-up" if reference["full_draw_with_top_up"] else "short")
            name = (subject or "(none)")[:width]
            lines.append(f"  {name:<{width}}  " + " ".join(f"{row[t]:>9}" for t in TIERS) + f"  {draw}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Export as an imagefolder dataset
# --------------------------------------------------------------------------------------------


def _hps_columns(entry: PoolEntry) -> dict[str, Any]:
    """HPSv3 scores kept in an entry's extra (imported columns such as ``hpsv3_score``)."""
    return {key: value for key, value in entry.extra.items()
            if key.lower().startswith("hps") and isinstance(value, (int, float)) and not isinstance(value, bool)}


def export_pool(pool: ReferencePool, out_dir: str | Path, tiers: Sequence[str] = DEFAULT_EXPORT_TIERS) -> Path:
    """Write the chosen tiers as an imagefolder dataset in ``out_dir`` and return it.

    Layout: ``<tier>/<id>.png``, ``sources/<id>.js`` (when the sketch is known) and
    ``metadata.jsonl`` with file_name, source_file, tier, subject, generator_model,
    paint_coverage, id and any HPSv3 score. Candidates are unrated, so never exported.
    The dataset is assembled beside ``out_dir`` and moved into place, so a failure never
    leaves a half-written export that the next attempt would refuse as non-empty.
    """
    out_dir = Path(out_dir)
    tiers = tuple(dict.fromkeys(tiers))
    if CANDIDATE in tiers:
        raise ValueError("candidates are unrated and never exported; choose from " + ", ".join(RATED_TIERS))
    unknown = [t for t in tiers if t not in RATED_TIERS]
    if unknown or not tiers:
        raise ValueError(f"tiers must be some of {', '.join(RATED_TIERS)}; got {', '.join(tiers) or 'none'}")
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} exists and is not a folder; export into a new or empty folder")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir} exists and is not empty; export into a new or empty folder")
    entries = [e for e in pool.entries() if e.tier in tiers]
    if not entries:
        raise ValueError(f"{pool.root} has no paintings in {', '.join(tiers)}: nothing to export")

    # Every row carries every HPSv3 column (None where unknown), so the dataset has one schema.
    hps_keys = sorted({key for e in entries for key in _hps_columns(e)})
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = out_dir.parent / f".{out_dir.name}.partial"
    if staging.exists():
        shutil.rmtree(staging)
    try:
        taken: set[str] = set()
        rows = []
        for entry in entries:
            # Ids are unique in practice, but nothing enforces it (a painting rated out of
            # candidate/ keeps its own stem); names must be, as images and sketches share them.
            name = entry.id
            while name in taken:
                name += "_"
            taken.add(name)
            suffix = Path(entry.file).suffix.lower() or ".png"
            file_name = f"{entry.tier}/{name}{suffix}"
            (staging / entry.tier).mkdir(parents=True, exist_ok=True)
            (staging / file_name).write_bytes(pool.png(entry))
            source_file = None
            code = pool.source(entry)
            if code is not None:
                source_file = f"sources/{name}.js"
                (staging / "sources").mkdir(exist_ok=True)
                (staging / source_file).write_text(code, encoding="utf-8")
            hps = _hps_columns(entry)
            rows.append({
                "file_name": file_name,
                "id": name,
                "tier": entry.tier,
                "subject": entry.subject,
                "generator_model": entry.generator,
                "paint_coverage": entry.paint_coverage,
                "source_file": source_file,
                **{key: hps.get(key) for key in hps_keys},
            })
        (staging / METADATA).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        if out_dir.exists():
            out_dir.rmdir()  # empty, checked above
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


# --------------------------------------------------------------------------------------------
# Judge consistency
# --------------------------------------------------------------------------------------------


class _VerdictRecorder(VerdictCache):
    """A judge cache that never answers, so every question really reaches the server, and
    keeps what the judge put into it: the resolved verdicts of the last call, by query key.
    Unresolved queries are never put, so a key missing here is an unresolved query."""

    def __init__(self):
        super().__init__(max_entries=0)
        self.recorded: dict[str, OrderVerdict] = {}
        self._recording_lock = threading.Lock()

    def get(self, key: str) -> OrderVerdict | None:
        return None

    def put(self, key: str, verdict: OrderVerdict) -> None:
        with self._recording_lock:
            self.recorded[key] = verdict

    def take(self) -> dict[str, OrderVerdict]:
        with self._recording_lock:
            recorded, self.recorded = self.recorded, {}
        return recorded


@dataclass
class _Comparison:
    """One judge call: a candidate against a set of references, with each order's verdict."""

    references: list[Reference]
    result: JudgeResult
    # Per reference: (winner with the candidate as A, winner with the candidate as B); None
    # where that order did not resolve.
    orders: list[tuple[str | None, str | None]]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _compare(judge: HttpJudge, recorder: _VerdictRecorder, candidate_png: bytes,
             references: list[Reference], subject: str | None) -> _Comparison:
    recorder.take()
    result = judge.score_sync(candidate_png, references, subject=subject)
    recorded = recorder.take()
    candidate_hash = _sha256(candidate_png)

    def winner(first: str, second: str) -> str | None:
        key = verdict_cache_key(first, second, model=judge.model_name, subject=subject,
                                probability_mode=judge.probability_mode)
        verdict = recorded.get(key)
        return verdict.winner if verdict is not None else None

    orders = []
    for reference in references:
        reference_hash = _sha256(reference.png)
        orders.append((winner(candidate_hash, reference_hash), winner(reference_hash, candidate_hash)))
    return _Comparison(references, result, orders)


def _draw_excluding(pool: ReferencePool, candidate: PoolEntry, excluded_ids: set[str], seed: int,
                    candidate_png: bytes, references: tuple[int, int]) -> list[Reference]:
    """References for ``candidate`` as ``ReferencePool.draw`` picks them in training, from the
    pool without the candidate and without ``excluded_ids`` (an earlier draw)."""
    rest = ReferencePool(pool.root, [e for e in pool.entries()
                                     if e is not candidate and e.file != candidate.file and e.id not in excluded_ids])
    subject = candidate.subject
    love, okay = references
    drawn = rest.draw(seed, love=love, okay=okay, subject=subject or None)
    # A copy of the candidate under another name is the candidate itself: its two orders would
    # be one question, answered once.
    return [r for r in drawn if r.png != candidate_png]


def _fraction(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def judge_consistency(pool: ReferencePool, judge_config: JudgeConfig, samples: int = 8, seed: int = 0,
                      references: tuple[int, int] = JUDGE_REFERENCES) -> dict[str, Any]:
    """How consistent the judge is on this pool, as a JSON-ready dict.

    Up to ``samples`` rated (love/okay) paintings, chosen with ``seed``, each face references
    drawn from the rest of the pool as in training (its subject's own first, topped up from
    the tier). Each candidate is judged three times: against draw 1, against draw 1 again,
    and against a second draw disjoint from the first. Measured:

    * repeat agreement: each ordered question asked twice got the same verdict;
    * order consistency: with the candidate as A and then as B, the same painting won (a
      judge that always answers one position scores 0);
    * reference stability: the candidate's score against draw 1 vs draw 2 (mean absolute
      difference; Spearman across candidates when at least 3 have both scores).

    The verdict cache is bypassed so repeats are really asked. Unresolved questions (judge
    errors, unreadable answers) are counted on their own and never taken as a verdict.
    A ``FatalScorerError`` (token refused) propagates.
    """
    rng = random.Random(seed)
    rated = pool.entries("love") + pool.entries("okay")
    chosen = rng.sample(rated, min(max(0, samples), len(rated)))
    recorder = _VerdictRecorder()
    judge = HttpJudge(judge_config, cache=recorder)

    repeat_compared = repeat_agreed = repeat_unresolved = 0
    pairs = pairs_consistent = pairs_unresolved = 0
    answered_a = answered = 0
    queries = unresolved = 0
    short_second_draws = 0
    score_pairs: list[tuple[float, float]] = []
    stability_unresolved = 0
    candidates = []
    try:
        for entry in chosen:
            png = pool.png(entry)
            subject = entry.subject or None
            draw_seeds = (rng.randrange(2**31), rng.randrange(2**31))
            first_draw = _draw_excluding(pool, entry, set(), draw_seeds[0], png, references)
            second_draw = _draw_excluding(pool, entry, {r.id for r in first_draw}, draw_seeds[1], png, references)
            if len(second_draw) < sum(references):
                short_second_draws += 1
            first = _compare(judge, recorder, png, first_draw, subject)
            repeat = _compare(judge, recorder, png, first_draw, subject)
            second = _compare(judge, recorder, png, second_draw, subject)

            for comparison in (first, repeat, second):
                for order in comparison.orders:
                    queries += 2
                    unresolved += sum(verdict is None for verdict in order)
            for asked, again in zip(first.orders, repeat.orders):
                for verdict, repeated in zip(asked, again):
                    if verdict is None or repeated is None:
                        repeat_unresolved += 1
                    else:
                        repeat_compared += 1
                        repeat_agreed += verdict == repeated
            # Every distinct comparison once: the first asking of draw 1, and draw 2.
            for as_a, as_b in first.orders + second.orders:
                if as_a is None or as_b is None:
                    pairs_unresolved += 1
                    continue
                pairs += 1
                # The candidate won as A and as B, or the reference won in both orders.
                pairs_consistent += (as_a == "A") == (as_b == "B")
                answered += 2
                answered_a += (as_a == "A") + (as_b == "A")
            if first.result.score is not None and second.result.score is not None:
                score_pairs.append((first.result.score, second.result.score))
            else:
                stability_unresolved += 1
            candidates.append({
                "id": entry.id,
                "tier": entry.tier,
                "subject": entry.subject,
                "references_first": [r.id for r in first_draw],
                "references_second": [r.id for r in second_draw],
                "score_first": first.result.score,
                "score_repeat": repeat.result.score,
                "score_second": second.result.score,
            })
    finally:
        judge.close()

    differences = [abs(a - b) for a, b in score_pairs]
    return {
        "pool": str(pool.root),
        "judge": {"base_url": judge_config.base_url, "model": judge_config.model},
        "seed": seed,
        "samples": len(chosen),
        "samples_requested": samples,
        "references_per_draw": {"love": references[0], "okay": references[1]},
        "queries": queries,
        "unresolved": unresolved,
        "repeat_agreement": {
            "compared": repeat_compared,
            "agreed": repeat_agreed,
            "unresolved": repeat_unresolved,
            "fraction": _fraction(repeat_agreed, repeat_compared),
        },
        "order_consistency": {
            "pairs": pairs,
            "consistent": pairs_consistent,
            "unresolved": pairs_unresolved,
            "fraction": _fraction(pairs_consistent, pairs),
            # Share of resolved verdicts naming painting A: 0.5 when the judge has no favourite
            # position, 1.0 for one that always answers A.
            "position_a_share": _fraction(answered_a, answered),
        },
        "reference_stability": {
            "candidates": len(score_pairs),
            "unresolved": stability_unresolved,
            "short_second_draws": short_second_draws,
            "mean_abs_difference": mean(differences),
            "spearman": spearman([a for a, _ in score_pairs], [b for _, b in score_pairs])
            if len(score_pairs) >= 3 else None,
        },
        "candidates": candidates,
    }


def format_consistency(report: dict[str, Any]) -> str:
    need = report["references_per_draw"]
    repeat, order, stability = report["repeat_agreement"], report["order_consistency"], report["reference_stability"]
    lines = [
        f"judge-check of {report['pool']}: {report['judge']['model']} at {report['judge']['base_url']}",
        f"  {report['samples']} candidates (seed {report['seed']}), each against {need['love']} love + "
        f"{need['okay']} okay references from the rest of the pool",
        f"  repeat agreement     {_number(repeat['fraction'])}  ({repeat['agreed']} of {repeat['compared']} "
        f"verdicts asked twice agreed; {repeat['unresolved']} unresolved)",
        f"  order consistency    {_number(order['fraction'])}  ({order['consistent']} of {order['pairs']} pairs: "
        f"the same painting won in both orders; {order['unresolved']} unresolved)",
        f"                       painting A won {_number(order['position_a_share'])} of resolved verdicts "
        "(0.5: no favourite position)",
        f"  reference stability  mean |score(draw 1) - score(draw 2)| {_number(stability['mean_abs_difference'])} "
        f"over {stability['candidates']} candidates; Spearman {_number(stability['spearman'])}"
        + (f"; {stability['unresolved']} without both scores" if stability["unresolved"] else ""),
    ]
    if stability["short_second_draws"]:
        lines.append(f"                       {stability['short_second_draws']} second draws were short of "
                     f"{sum(need.values())} references (the pool is small for two disjoint draws)")
    lines.append(f"  unresolved           {report['unresolved']} of {report['queries']} questions "
                 "(judge errors or unreadable answers; never counted as a verdict)")
    return "\n".join(lines)
