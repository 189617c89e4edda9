"""Pairwise VLM judge: is the candidate a better watercolour than each reference?

For every reference the judge is asked twice, once with the candidate as painting A and once as
painting B, because vision-language judges prefer one position; asking both orders cancels that
bias. A win in both orders scores 1, a split 0.5, a loss in both 0. The painting's score is the
mean over the references that resolved; with fewer than half of them resolved the score is
``None`` and the rollout is dropped, never scored 0.

* ``prompt``: the judge's instructions and the chat messages showing painting A and B.
* ``verdict``: reading one answer: the hard verdict, and P(A) from log-probabilities.
* ``cache``: resolved verdicts keyed by images, order, model, prompt version and subject.
* ``scoring``: from both orders' verdicts to a score, and the backend-neutral judge.
* ``client``: ``HttpJudge`` and ``JudgeConfig``, for any OpenAI-compatible endpoint.
"""

from rewards.http_retry import FatalScorerError
from rewards.judge.cache import VerdictCache, verdict_cache_key
from rewards.judge.client import DEFAULT_BASE_URL, DEFAULT_MODEL, HttpJudge, JudgeConfig
from rewards.judge.prompt import (
    ANSWER_FORMAT,
    CRITERIA,
    JUDGE_PROMPT_VERSION,
    MAX_SUBJECT_CHARS,
    SYSTEM_PROMPT,
    build_judge_messages,
    png_data_url,
)
from rewards.judge.scoring import JudgeResult, Reference, ReferenceLike, aggregate_reference_scores, pair_score
from rewards.judge.verdict import LogprobStep, OrderVerdict, Verdict, parse_verdict, verdict_probability

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "FatalScorerError",
    "HttpJudge",
    "JUDGE_PROMPT_VERSION",
    "JudgeConfig",
    "JudgeResult",
    "LogprobStep",
    "OrderVerdict",
    "Reference",
    "VerdictCache",
    "aggregate_reference_scores",
    "build_judge_messages",
    "pair_score",
    "parse_verdict",
    "verdict_cache_key",
    "verdict_probability",
]
