"""Multi-turn GRPO on TRL: lockstep painting episodes whose images reach the loss pass.

How it plugs into TRL 1.16 (pinned; ``check_trl_pin`` fails loudly on another version):

* ``rollout_func`` runs the episodes through the one episode loop
  (``multiturn_trainer.rollout.EpisodeRunner``) with ``TrainerPolicy``: every episode's turn
  k is generated in one batch through ``trainer._generate_single_turn`` (plain HF generate or
  vLLM, whatever TRL is set up with), all turn-k sketches render in parallel, then each
  episode gets the next user turn (its own painting + the environment's feedback) as
  environment tokens (``env_mask`` 0, not trained). TRL logs lengths, computes group
  advantages and drops ``None`` rewards from the group baseline.
* With ``credit: reward_to_go`` the advantages become per token (TRL 1.16's loss takes a
  (B, T) tensor): turn k's tokens carry its reward to go (``turn_advantages``); with
  ``credit: turn``, its own painting's score against its group's turn k; with
  ``credit: turn_then_to_go``, turn 1 its own score and each revision its reward to go.
* TRL's rollout path forgets images made inside an episode, so ``_generate_and_score_completions``
  adds them back (pixel values, grids, ``mm_token_type_ids``, image counts) before the loss
  pass, and recomputes old/reference log-probs with them when TRL needed those.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from trl import GRPOTrainer
from trl.trainer.utils import nanstd

from multiturn_trainer.config import TrainConfig
from multiturn_trainer.env_backends import EpisodeEnvironments
from multiturn_trainer.episodes import loss_image_inputs, turn_of_each_token
from multiturn_trainer.evaluation_stats import mean
from multiturn_trainer.families import family_of
from multiturn_trainer.rollout import Episode, EpisodeBatch, EpisodeRunner, run_into_store
from multiturn_trainer.store import EpisodeRecord, RunStore, checkpoint_step, turn_gains, turn_statistics
from rewards.mixer import COMPONENTS, RewardScorer

TRL_PIN = "1.16.0"
# The private TRL members this module relies on; the pin test checks they still exist.
TRL_INTERNALS = ("_generate_single_turn", "_tokenize_prompts", "_generate", "_generate_and_score_completions",
                 "_get_per_token_logps_and_entropies", "_save_checkpoint")


def check_trl_pin() -> None:
    import trl

    if trl.__version__ != TRL_PIN:
        raise RuntimeError(
            f"multiturn_trainer needs trl=={TRL_PIN} (it overrides GRPOTrainer internals); found {trl.__version__}"
        )
    missing = [name for name in TRL_INTERNALS if not hasattr(GRPOTrainer, name)]
    if missing:
        raise RuntimeError(f"trl {trl.__version__} lacks GRPOTrainer.{', '.join(missing)}")


def episode_reward(prompts, completions, episode_reward, **kwargs) -> list[float | None]:
    """TRL's reward function (its name names the metric): hands on the reward the rollout took from
    ``TrainConfig.episode_reward`` (None = unscorable: TRL leaves it out of the group)."""
    return [None if r is None else float(r) for r in episode_reward]


def multiturn_rollout(prompts: list, trainer: "MultiTurnGRPOTrainer") -> dict[str, Any]:
    return trainer.run_episodes(prompts)


class TrainerPolicy:
    """The trainer's own generation as a token policy for the episode runner: TRL's
    ``_generate_single_turn`` (plain HF generate or vLLM, whatever TRL is set up with) on the
    episodes' token contexts and images, and TRL's prompt tokenization."""

    works_on = "tokens"

    def __init__(self, trainer: "MultiTurnGRPOTrainer"):
        self.trainer = trainer
        self.processor = trainer.processing_class
        self.eos_token_ids = trainer.eos_token_ids
        self.image_pad_token_id = trainer._image_pad_token_id
        self.chat_template_kwargs = trainer.chat_template_kwargs
        self.family = trainer.family
        self.sees_images = trainer.family.sees_images

    def prompt_ids(self, prompts: list) -> list[list[int]]:
        prompts = [self.family.chat_messages(prompt) for prompt in prompts]
        return [list(ids) for ids in self.trainer._tokenize_prompts(prompts)[0]]

    def generate(self, contexts, images, fields):
        trainer = self.trainer
        if trainer.use_vllm and trainer.args.vllm_mode == "colocate" and self.image_pad_token_id is not None:
            # The episode contexts hold one <|image_pad|> per image token (what the loss pass
            # needs), but a colocated vLLM engine renders the prompt itself from token ids plus
            # ``multi_modal_data``: it expects one pad per image and expands it again. Fed the
            # expanded runs it silently builds a longer, wrong prompt (two images: the second
            # one inside the first one's run). Server mode keeps the expanded ids: there TRL
            # places precomputed image features on the runs it finds.
            contexts = [collapse_image_pads(ids, self.image_pad_token_id) for ids in contexts]
        return trainer._generate_single_turn(contexts, images, fields, 1)


def reload_weights_on_cpu(generation) -> None:
    """On vLLM's CPU backend, push the (LoRA-merged) weights through ``reload_weights``.

    The CPU backend repacks linear weights for its kernels after loading them, so TRL's
    per-tensor ``model.load_weights`` sync into the live model fails there; the model runner's
    ``reload_weights`` takes the same checkpoint-format stream and loads and repacks it as at
    start-up. On a GPU, TRL's own sync is left as it is.
    """
    try:
        from vllm.platforms import current_platform
    except ImportError:  # TRL was handed another engine (the tests' stand-in)
        return
    if not current_platform.is_cpu():
        return
    llm = generation.llm
    runner = llm.llm_engine.model_executor.driver_worker.model_runner

    def sync_weights():
        runner.reload_weights(weights_iterator=generation._iter_named_params(), is_checkpoint_format=True)
        llm.reset_prefix_cache()

    generation.sync_weights = sync_weights


def collapse_image_pads(ids: list[int], image_pad_id: int) -> list[int]:
    """``ids`` with each run of ``image_pad_id`` shortened to one token (one per image)."""
    out: list[int] = []
    for token in ids:
        if token == image_pad_id and out and out[-1] == image_pad_id:
            continue
        out.append(token)
    return out


class MultiTurnGRPOTrainer(GRPOTrainer):
    def __init__(self, *args, run_config: TrainConfig, environments: EpisodeEnvironments, scorer: RewardScorer,
                 store: RunStore, **kwargs):
        self.run_config = run_config
        self.painting_envs = environments
        self.scorer = scorer
        self.store = store
        self.runner = EpisodeRunner(run_config, environments, scorer)
        self._episode_rows: list[dict[str, Any]] = []
        self._episode_batch: EpisodeBatch | None = None
        self._episode_records: list[EpisodeRecord] = []
        self.last_episode_batch: EpisodeBatch | None = None
        self._last_step_metrics: dict[str, Any] = {}
        # rollout_func is "experimental" in TRL; we pin TRL and test the members we use instead.
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
        super().__init__(*args, reward_funcs=[episode_reward], rollout_func=multiturn_rollout, **kwargs)
        self.family = family_of(self.model)
        wanted = self.family.image_pad_token_id(self._tokenizer) if self.family.sees_images else None
        if self._image_pad_token_id != wanted:
            # TRL resolves the placeholder itself (its generation and loss pass use its own);
            # episodes built with another one would put the images on the wrong tokens.
            raise ValueError(f"TRL's image placeholder id {self._image_pad_token_id} is not the "
                             f"{self.family.name} family's {self.family.image_pad_token!r} ({wanted})")
        if self.use_vllm and self.args.vllm_mode == "colocate":
            reload_weights_on_cpu(self.vllm_generation)

    # --- episodes ------------------------------------------------------------------------
    def run_episodes(self, prompts: list) -> dict[str, Any]:
        """TRL's rollout: the episode runner with this trainer's generation, output in TRL's shape."""
        rows = self._episode_rows
        if len(rows) != len(prompts):
            raise RuntimeError("run_episodes called outside _generate_and_score_completions")
        step = self.state.global_step + 1
        generations = self.run_config.num_generations
        # With several processes (accelerate launch) each generates its own groups; number
        # them globally so episode ids stay unique across the run directory.
        group_offset = self.accelerator.process_index * (len(rows) // generations)
        places = [(step, i // generations + group_offset, i % generations) for i in range(len(rows))]
        batch, self._episode_records = run_into_store(self.runner, TrainerPolicy(self), rows, places, self.store)
        self._episode_batch = batch
        tokens = [episode.tokens for episode in batch.episodes]
        logps = [episode.sampling_logps for episode in batch.episodes]
        return {
            "prompt_ids": [t.prompt_ids for t in tokens],
            "completion_ids": [t.completion_ids for t in tokens],
            "logprobs": None if any(lp is None for lp in logps) else logps,
            "env_mask": [t.env_mask for t in tokens],
            "episode_reward": batch.rewards,
        }

    # --- TRL hooks -----------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs):
        self._episode_rows = inputs
        output = super()._generate_and_score_completions(inputs)
        batch = self._episode_batch
        if batch is None or len(batch.episodes) != output["completion_ids"].size(0):
            raise RuntimeError("the episode batch does not match TRL's generation batch")
        self._drop_unscored(output, batch)
        if self.run_config.credit != "episode":
            advantages = output["advantages"]
            output["advantages"] = turn_advantages(
                batch.episodes, self.run_config.num_generations, output["completion_ids"].size(1),
                self.args.scale_rewards, self.run_config.credit).to(device=advantages.device, dtype=advantages.dtype)
        self._attach_images(output, batch)
        self._record(batch)
        self.last_episode_batch = batch  # kept for inspection (tests, debugging)
        self._episode_rows, self._episode_batch = [], None
        return output

    def _drop_unscored(self, output, batch: EpisodeBatch) -> None:
        """A None reward (failed render or scorer) removes the episode from the loss too."""
        dropped = [i for i, reward in enumerate(batch.rewards) if reward is None]
        if not dropped:
            return
        output["tool_mask"][dropped] = 0
        loss_mask = output["completion_mask"] * output["tool_mask"]
        # Clamp: a step where every episode failed trains on nothing instead of dividing by zero.
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum().clamp(min=1)

    def _attach_images(self, output, batch: EpisodeBatch) -> None:
        prompt_completion_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        image_inputs = loss_image_inputs([e.tokens for e in batch.episodes], prompt_completion_ids,
                                         self._image_pad_token_id)
        if not image_inputs:
            return
        output.update(image_inputs)
        needs_old = "old_per_token_logps" in output
        needs_ref = "ref_per_token_logps" in output
        if not (needs_old or needs_ref):
            return
        attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)

        def logps(model) -> torch.Tensor:
            return self._get_per_token_logps_and_entropies(
                model, prompt_completion_ids, attention_mask, output["completion_ids"].size(1),
                batch_size=self.args.per_device_train_batch_size, **image_inputs,
            )[0]

        with torch.no_grad():
            if needs_old:
                output["old_per_token_logps"] = logps(self.model)
                if "importance_sampling_ratio" in output:
                    # TRL computed the ratio from log-probs without the images; the sampler saw them.
                    mask = output["completion_mask"] * output.get("tool_mask", 1)
                    old, sampled = output["old_per_token_logps"], output["sampling_per_token_logps"]
                    ratio = importance_sampling_ratio(old, sampled, mask, self.args)
                    output["importance_sampling_ratio"] = ratio
                    # TRL logged its image-less figures already; these are the ones the loss uses.
                    delta = (old - sampled).abs()[mask.bool() & ~torch.isnan(sampled)]
                    kept = ratio.flatten() if ratio.size(-1) == 1 else ratio[mask.bool()]
                    metrics = self._metrics["train"]
                    metrics["sampling/with_images/logp_difference_max"].append(
                        float(delta.max()) if delta.numel() else 0.0)
                    metrics["sampling/with_images/importance_sampling_ratio_mean"].append(
                        float(kept.mean()) if kept.numel() else 1.0)
            if needs_ref:
                if self.ref_model is not None:
                    output["ref_per_token_logps"] = logps(self.ref_model)
                else:
                    with self.accelerator.unwrap_model(self.model).disable_adapter():
                        output["ref_per_token_logps"] = logps(self.model)

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        """HF's warm-up schedules evaluate step/warmup at step 0, so the first optimizer step ran
        at learning rate 0: with the presets' 5 warm-up steps every ``lora_B`` was still zero
        after step 1 (a ~45-minute 35B step that trained nothing). Warm-up steps are counted
        from 1 here: step 1 trains at lr/warmup, step ``warmup`` at the full rate."""
        scheduler = super().create_scheduler(num_training_steps, optimizer)
        warmup = self.args.get_warmup_steps(num_training_steps)
        lambdas = getattr(scheduler, "lr_lambdas", None)
        if warmup > 0 and lambdas is not None and not getattr(scheduler, "_warmup_from_one", False):
            scheduler.lr_lambdas = [lambda step, f=f: f(step + 1) if step < warmup else f(step) for f in lambdas]
            scheduler._warmup_from_one = True
            lrs = [base * f(scheduler.last_epoch) for base, f in zip(scheduler.base_lrs, scheduler.lr_lambdas)]
            for group, lr in zip(scheduler.optimizer.param_groups, lrs):
                group["lr"] = lr
            scheduler._last_lr = lrs
        return scheduler

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, pixel_values=None,
                                           image_grid_thw=None, num_images=None, mm_token_type_ids=None, **other):
        """TRL's log-prob pass, chunked here so a chunk without images gets no image inputs.

        TRL slices ``pixel_values`` per chunk and passes the empty slice of an image-less
        chunk to the model, whose vision tower then fails ("repeats must have the same
        size"): with micro-batch 1 (the 35B preset) any episode whose turns all failed the
        gate crashed the step. Reproduced with ``trainer.train()``, 3 turns, image counts
        [2, 0, 1, 2] (tests/multiturn_trainer/test_microbatch.py).
        """
        parent = super()._get_per_token_logps_and_entropies
        common = dict(compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss)
        if pixel_values is None or num_images is None or any(v is not None for v in other.values()):
            return parent(model, input_ids, attention_mask, logits_to_keep, batch_size, pixel_values=pixel_values,
                          image_grid_thw=image_grid_thw, num_images=num_images, mm_token_type_ids=mm_token_type_ids,
                          **common, **other)
        size = batch_size or input_ids.size(0)
        # pixel_values rows: a Qwen-style grid's patches per image, else one image per row.
        rows_per_image = image_grid_thw.prod(dim=-1).tolist() if image_grid_thw is not None else [1] * sum(num_images)
        first_image = [0]
        for count in num_images:
            first_image.append(first_image[-1] + count)
        first_row = [0]
        for rows in rows_per_image:
            first_row.append(first_row[-1] + rows)
        logps, entropies, aux_losses = [], [], []
        for start in range(0, input_ids.size(0), size):
            end = min(start + size, input_ids.size(0))
            images_from, images_to = first_image[start], first_image[end]
            images = {}
            if images_to > images_from:
                images = dict(pixel_values=pixel_values[first_row[images_from]:first_row[images_to]],
                              num_images=list(num_images[start:end]))
                if image_grid_thw is not None:
                    images["image_grid_thw"] = image_grid_thw[images_from:images_to]
            chunk_logps, chunk_entropies, chunk_aux = parent(
                model, input_ids[start:end], attention_mask[start:end], logits_to_keep, None,
                mm_token_type_ids=None if mm_token_type_ids is None else mm_token_type_ids[start:end],
                **images, **common,
            )
            logps.append(chunk_logps)
            entropies.append(chunk_entropies)
            aux_losses.append(chunk_aux)
        return (torch.cat(logps, dim=0), torch.cat(entropies, dim=0) if compute_entropy else None,
                torch.stack(aux_losses).mean() if compute_aux_loss else None)

    def _record(self, batch: EpisodeBatch) -> None:
        """The step's contact sheet (its episodes are in episodes.jsonl already), step metrics to TRL's logs."""
        step = self.state.global_step + 1
        cfg = self.run_config
        records = self._episode_records
        self.store.write_step_sheet(step, records, part=self.accelerator.process_index)
        metrics = step_metrics(records, cfg.turns, cfg.num_generations, batch.timings)
        for name, value in metrics.items():
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                self._metrics["train"][name].append(value)
        self._last_step_metrics = metrics

    def _save_checkpoint(self, model, trial):
        """TRL/HF save ``checkpoint-N``; the run directory's contract is ``checkpoints/step-N``."""
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

        super()._save_checkpoint(model, trial)
        if not self.args.should_save:
            return
        root = Path(self._get_output_dir(trial=trial))
        source = root / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        target = root / f"step-{self.state.global_step}"
        if source.is_dir():
            if target.exists():
                shutil.rmtree(target)
            source.rename(target)
        limit = self.run_config.save_total_limit
        if limit:
            kept = sorted((p for p in root.iterdir() if p.name.startswith("step-")), key=checkpoint_step)
            for old in kept[:-limit]:
                shutil.rmtree(old, ignore_errors=True)


def turn_advantages(episodes: list[Episode], generations: int, width: int, scale: str,
                    credit: str = "reward_to_go") -> torch.Tensor:
    """Per-token advantages (B, width) for ``credit: reward_to_go``, ``turn`` or ``turn_then_to_go``.

    ``reward_to_go``: the episode's reward is its last painting's, r_K = r_1 + (r_2 - r_1) + ... :
    what turn k can still change is r_K - r_{k-1}, and r_{k-1} is fixed by the painting turn k
    starts from, so subtracting it (a baseline that depends on turn k's state only) leaves the
    policy gradient of r_K unbiased while a revision stops inheriting the luck of the turns
    before it. Turn 1 has no painting to start from: its baseline is the group's mean final
    reward, as in GRPO. So a revision that keeps its painting's reward earns 0, one that repairs
    a failure +, one that breaks a pass -.

    ``turn``: every turn is its own GRPO problem, turn k's tokens carrying turn k's painting's
    score against the mean of the group's turn-k scores. The objective is then each painting's
    own score, not the final one: a turn 1 that fails is not credited with the repair its
    revision made (under ``episode`` credit a failed turn 1 followed by a passing revision was
    pushed up, and a passing turn 1 followed by a broken revision pushed down: in two demo runs
    that was 43 and 64 of 126 episodes).

    ``turn_then_to_go``: turn 1 as ``turn`` (its own painting against the group's turn-1 mean:
    a failed first sketch is pushed down whatever its revision repairs), each revision as
    ``reward_to_go`` (r_K - r_{k-1}: what it changed over the painting it started from). Under
    ``turn`` a revision was judged against revisions that started from other paintings; under
    ``reward_to_go`` turn 1 was credited with its revisions' repairs.

    ``scale`` as TRL's ``scale_rewards`` (group, batch or none) divides every turn's values by
    the spread of the rewards of all the group's (or batch's) scored paintings, every turn: one
    unit for all turns, and 0 only where every painting scored the same, so every gain is 0 too
    (a revision's gain divided by the spread of the revision gains alone blew up ~10^4-fold in a
    group whose revisions all gained alike). Zero: environment tokens, padding, a dropped episode
    (reward None), and a turn whose painting (``turn``) or previous painting (``reward_to_go``)
    has no score (an infrastructure failure).
    """
    turns = max((len(e.observations) for e in episodes), default=0)
    to_go = torch.full((len(episodes), max(turns, 1)), float("nan"), dtype=torch.float64)
    paintings = torch.full_like(to_go, float("nan"))
    for i, episode in enumerate(episodes):
        if episode.reward is None:
            continue
        for k in range(1, len(episode.observations) + 1):
            score = episode.turn_scores.get(k)
            if score is not None:
                paintings[i, k - 1] = score.total
            previous = episode.turn_scores.get(k - 1)
            before = 0.0 if k == 1 else None if previous is None else previous.total
            if before is not None:
                to_go[i, k - 1] = episode.reward - before
    # Centred on the group's mean: every turn's own score, or turn 1's (own score or reward to go;
    # a revision's baseline is already its previous painting).
    values = paintings if credit == "turn" else to_go.clone()
    if credit == "turn_then_to_go":
        values[:, 0] = paintings[:, 0]
    centred = values.clone()
    for column in range(values.size(1) if credit == "turn" else 1):
        group = values[:, column].view(-1, generations)
        centred[:, column] = (group - group.nanmean(dim=1, keepdim=True)).reshape(-1)
    if scale == "group":
        spread = _spread(paintings.view(-1, generations * paintings.size(1)), dim=1)
        centred = centred / (spread.repeat_interleave(generations).unsqueeze(1) + 1e-4)
    elif scale == "batch":
        centred = centred / (_spread(paintings.flatten(), dim=0) + 1e-4)
    elif scale != "none":
        raise ValueError(f"scale_rewards must be group, batch or none, got {scale!r}")
    # Column 0 of each row is 0: environment tokens and padding (turn 0) read it.
    per_turn = torch.nn.functional.pad(torch.nan_to_num(centred, nan=0.0).float(), (1, 0))
    advantages = torch.zeros(len(episodes), width, dtype=torch.float32)
    for i, episode in enumerate(episodes):
        turn_ids = turn_of_each_token(episode.tokens.env_mask if episode.tokens is not None else [])[:width]
        advantages[i, :len(turn_ids)] = per_turn[i, turn_ids]
    return advantages


def _spread(values: torch.Tensor, dim: int) -> torch.Tensor:
    """TRL's NaN-ignoring standard deviation, 0 where fewer than two values (TRL's NaN)."""
    return torch.nan_to_num(nanstd(values, dim=dim), nan=0.0)


def importance_sampling_ratio(old_logps: torch.Tensor, sampling_logps: torch.Tensor, mask: torch.Tensor,
                              args) -> torch.Tensor:
    """TRL 1.16's vLLM importance-sampling ratio (``vllm_importance_sampling_mode`` and clips), for
    log-probs recomputed with the episode images. NaN sampling log-probs (environment tokens,
    tokens vLLM could not score) contribute no correction."""
    diff = torch.nan_to_num((old_logps - sampling_logps) * mask, nan=0.0)
    mode = args.vllm_importance_sampling_mode
    if mode.startswith("sequence_"):
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff)
    low, high = args.vllm_importance_sampling_clip_min, args.vllm_importance_sampling_clip_max
    if mode.endswith("_truncate"):
        return torch.clamp(ratio, min=low, max=high)
    if mode.endswith("_mask"):
        low = -math.inf if low is None else low
        high = math.inf if high is None else high
        return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)
    raise ValueError(f"unknown vllm_importance_sampling_mode {mode!r}")


def step_metrics(records: list[dict[str, Any]], turns: int, generations: int,
                 timings: dict[str, float]) -> dict[str, float | None]:
    """One step's numbers: reward, components, gate/coverage by turn, within-episode gain, times."""
    metrics: dict[str, float | None] = {}
    rewards = [r["reward"] for r in records]
    scored = [x for x in rewards if x is not None]
    metrics["episode/reward_mean"] = mean(scored)
    metrics["episode/reward_std"] = _std(scored)
    metrics["episode/dropped"] = float(len(rewards) - len(scored))
    for name in COMPONENTS:
        values = [r["components"].get(name) for r in records if r["components"].get(name) is not None]
        if values:
            metrics[f"components/{name}/mean"] = mean(values)
            metrics[f"components/{name}/std"] = _std(values)
    # Infrastructure failures, counted so a run that silently loses its judge shows it: turns
    # whose render failed, and scored turns whose weighted component came back None.
    turns_seen = [t for r in records for t in r["turns"]]
    metrics["failures/render"] = float(sum(bool(t.get("infrastructure_failed")) for t in turns_seen))
    weights = records[0].get("weights", {}) if records else {}
    for name in COMPONENTS:
        if weights.get(name):
            metrics[f"failures/{name}"] = float(sum(1 for t in turns_seen if t.get("components")
                                                    and name in t["components"] and t["components"][name] is None))
    for row in turn_statistics(records):
        metrics[f"turns/{row['turn']}/gate_pass_rate"] = row["gate_pass_rate"]
        metrics[f"turns/{row['turn']}/coverage"] = row["coverage"]
        if row["reward"] is not None:
            metrics[f"turns/{row['turn']}/reward_mean"] = row["reward"]
    final = [r["turns"][-1] for r in records if r["turns"]]
    metrics["gate_pass_rate"] = mean([float(t["passed"]) for t in final])
    metrics["coverage"] = mean([t["paint_fraction"] for t in final])
    metrics["turn_gain"] = mean(turn_gains(records)) if turns > 1 else 0.0
    groups = [rewards[g:g + generations] for g in range(0, len(rewards), generations)]
    zero_std = [float(len({x for x in group if x is not None}) <= 1) for group in groups]
    metrics["episode/frac_groups_zero_std"] = mean(zero_std)
    for phase, seconds in timings.items():
        metrics[f"time/{phase}"] = seconds
    return metrics


def _std(values: list[float]) -> float | None:
    if len(values) < 2:
        return 0.0 if values else None
    centre = mean(values)
    return math.sqrt(sum((v - centre) ** 2 for v in values) / (len(values) - 1))


def log_line(step: int, total: int, metrics: dict[str, Any]) -> str:
    def f(key, fmt="{:.3f}"):
        value = metrics.get(key)
        return "-" if value is None else fmt.format(value)

    failures = " ".join(f"{key.split('/', 1)[1]} {value:.0f}" for key, value in sorted(metrics.items())
                        if key.startswith("failures/") and value)
    return (f"step {step}/{total}  reward {f('episode/reward_mean')}  gate {f('gate_pass_rate', '{:.0%}')}"
            f"  coverage {f('coverage', '{:.0%}')}  turn_gain {f('turn_gain', '{:+.3f}')}"
            f"  dropped {f('episode/dropped', '{:.0f}')}"
            f"{'  failures ' + failures if failures else ''}  loss {f('loss', '{:.4f}')}"
            f"  time gen {f('time/generate', '{:.0f}s')} render {f('time/render', '{:.0f}s')}"
            f" score {f('time/score', '{:.0f}s')} train {f('time/train', '{:.0f}s')}"
            + (f"  eval final-turn1 {f('eval/final_minus_first', '{:+.3f}')}"
               f" final-best_of_k {f('eval/final_minus_best_of_k', '{:+.3f}')} ({f('time/eval', '{:.0f}s')})"
               if "eval/reward_turn_1" in metrics else ""))

