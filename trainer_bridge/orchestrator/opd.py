"""`opd`, on-policy distillation: the student samples, a frozen teacher scores each sampled token.

Each scored rollout becomes its token-exact samples (samples.py), and each sampled token i
gets the advantage log π_teacher(x_i | x_<i) − log μ(x_i | x_<i), μ the sampler's logprob as
recorded (tempered at the sampling temperature: at temperature 1 the policy gradient is that
of the per-token reverse KL to the teacher). Prompt, tool and template tokens get 0 and are not
trained. The reward plays no part (it is still logged); no group baseline, so a group needs one
rollout, not two. The teacher must share the student's tokenizer and give logprobs of given
tokens (inference/teachers.py refuses one that cannot, before anything loads).
"""

from __future__ import annotations

from collections.abc import Sequence

from prime_env.record import RolloutRecord
from trainer_bridge.inference.teachers import TeacherScorer, check_teacher
from trainer_bridge.orchestrator.algorithm_api import AlgoContext, GroupRequest, sample_group
from trainer_bridge.orchestrator.groups import Group
from trainer_bridge.orchestrator.rewards import training_reward
from trainer_bridge.orchestrator.samples import SampleError, samples_from_record
from trainer_bridge.protocol.batches import TrainSample


def token_advantages(sample: TrainSample, teacher_logprobs: Sequence[float]) -> list[float]:
    """Per token: teacher − sampler logprob where the mask is 1, else 0. `teacher_logprobs[j]`
    is the teacher's logprob of `input_ids[j + 1]` (TeacherScorer's form)."""
    if len(teacher_logprobs) != len(sample.input_ids) - 1:
        raise ValueError(
            f"the teacher scored {len(teacher_logprobs)} tokens of a "
            f"{len(sample.input_ids)}-token sample (expected {len(sample.input_ids) - 1})"
        )
    teacher = [0.0, *teacher_logprobs]
    return [
        teacher[i] - sample.sampler_logprobs[i] if sample.loss_mask[i] else 0.0
        for i in range(len(sample.input_ids))
    ]


class OnPolicyDistillation:
    """The `opd` algorithm (see the module docstring)."""

    def __init__(self, context: AlgoContext) -> None:
        teacher = context.config.algo.teacher
        assert teacher is not None  # config.AlgoConfig requires one
        check_teacher(teacher, logprobs=True)
        self.context = context
        self.teacher = teacher
        self.temperature = context.config.sampling.temperature
        self._scorer: TeacherScorer | None = None

    @property
    def scorer(self) -> TeacherScorer:
        if self._scorer is None:
            self._scorer = self.context.teachers.scorer(self.teacher)
        return self._scorer

    def screen(self, key: str, version: int, records: list[RolloutRecord], order: int = 0) -> Group:
        """The group's samples, not yet scored by the teacher (make_group scores them)."""
        for record in records:
            if record.policy_version is None:
                record.policy_version = version
        group = Group(key, version, records, order)
        group.version = min((r.policy_version or version for r in records), default=version)
        weights = self.context.weights
        group.train_rewards = [training_reward(r, weights) for r in records if r.error is None]
        for record in records:
            if record.error is not None or record.reward is None:
                continue
            try:
                group.samples += samples_from_record(
                    record, advantage=0.0, temperature=self.temperature, group=key
                )
                group.rollouts += 1
            except SampleError as exc:
                group.sample_errors[exc.error_type] += 1
        if not group.samples:
            group.dropped = next(iter(group.sample_errors), "group_too_small")
        return group

    async def make_group(self, request: GroupRequest) -> Group:
        records = await sample_group(self.context.env, request.client, request)
        group = self.screen(request.key, request.version, records, request.order)
        scored = []
        for sample in group.samples:
            teacher = await self.scorer.logprobs(sample.input_ids)
            scored.append(
                sample.model_copy(update={"advantages": token_advantages(sample, teacher)})
            )
        group.samples = scored
        return group
