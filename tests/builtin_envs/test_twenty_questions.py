"""twenty-questions: the scripted user's answers, the reference policy that finds every object
through real questions, poor policies that score low, a model-played user, and the user's turns marked."""

from __future__ import annotations

import pytest
from twenty_questions import ATTRIBUTES, OBJECTS, REFERENCE_QUESTIONS, answer, load_environment
from twenty_questions.reference import candidates

from prime_env import (
    ChatResponse,
    ReferenceClient,
    SamplingArgs,
    Task,
    Usage,
    run_rollouts,
    summarize,
)
from prime_env.reference_check import validate_reference
from tests.builtin_envs.policy import PolicyClient


def test_every_attribute_question_is_understood_and_objects_differ() -> None:
    from twenty_questions.answerer import attribute

    for name, words in ATTRIBUTES.items():
        for word in words:
            assert attribute(f"Is it {word}?") == name, word
    assert answer("Is it an animal?", "dog") == ("Yes.", False)
    assert answer("Can it fly?", "dog") == ("No.", False)
    assert answer("is it a DOG?!", "dog")[1] is True
    assert answer("Is it a cat?", "dog") == ("No, it is not a cat.", False)
    assert answer("hello there", "dog")[0].startswith("I can only answer yes/no questions")
    signatures = {}
    for name, facts in OBJECTS.items():
        signatures.setdefault(facts, []).append(name)
    assert max(len(v) for v in signatures.values()) <= 2  # the questions can nearly always tell


async def test_the_reference_finds_every_object_through_the_dialogue() -> None:
    env = load_environment(num_eval_examples=20)
    report = await validate_reference(env)
    assert report.passed and report.errors == 0, report.shortfalls
    records = report.records
    assert all(r.metrics["solved"] == 1.0 for r in records)
    assert all(r.stop_reason == "env_done" for r in records)
    assert report.mean is not None and report.mean > 0.8
    assert all(r.metrics["repeated"] == 0 and r.metrics["unanswerable"] == 0 for r in records)
    record = records[0]
    simulated = record.trace.simulated
    messages = record.prompt + record.completion
    assert simulated and all(messages[i]["role"] == "user" for i in simulated)
    # every user message after the opening is the simulated user's
    users = [i for i, m in enumerate(messages) if m["role"] == "user" and i >= len(record.prompt)]
    assert simulated == users
    assert [c.reply for c in record.trace.calls] == [
        i for i, m in enumerate(messages) if m["role"] == "assistant"
    ]


async def test_the_reference_needs_at_most_its_declared_questions_for_every_object() -> None:
    """Every one of the objects, not only the eval set's draw: what `min_reward` rests on."""
    env = load_environment(num_eval_examples=1)
    tasks = [
        Task(prompt=env.get_eval_tasks()[0].prompt, answer=name, info={"max_questions": 20})
        for name in sorted(OBJECTS)
    ]
    states = [await env.harness.rollout(ReferenceClient(env), task) for task in tasks]
    asked = [sum(m["role"] == "assistant" for m in s.completion) for s in states]
    assert max(asked) == REFERENCE_QUESTIONS
    assert all(s.stop_reason == "env_done" for s in states)


def test_the_reference_reads_denied_guesses_and_answers_off_the_dialogue() -> None:
    dialogue = [
        {"role": "user", "content": "I'm thinking of an object."},
        {"role": "assistant", "content": "Is it an animal?"},
        {"role": "user", "content": "Yes."},
        {"role": "assistant", "content": "Is it a dog?"},
        {"role": "user", "content": "No, it is not a dog."},
    ]
    left, asked = candidates(dialogue)
    assert asked == {"animal"} and "dog" not in left
    assert left == {n for n, facts in OBJECTS.items() if "animal" in facts} - {"dog"}


async def test_poor_policies_score_low() -> None:
    env = load_environment(num_eval_examples=10, max_questions=5)
    chatter = await run_rollouts(env, PolicyClient(lambda m: "I like trains."), n=10)
    assert summarize(chatter).reward_mean == 0.0
    assert all(r.metrics["unanswerable"] == 5 and r.metrics["questions"] == 5 for r in chatter)
    parrot = await run_rollouts(env, PolicyClient(lambda m: "Is it an animal?"), n=10)
    assert all(r.metrics["repeated"] == 4 for r in parrot)
    assert summarize(parrot).reward_mean == 0.0


class UserModel:
    """A model playing the user: confirms any guess of the secret in its prompt."""

    model, provider, base_url = "user-model", "scripted", None

    def __init__(self) -> None:
        self.seen: list[list[dict]] = []

    async def chat(self, messages, *, tools=None, sampling: SamplingArgs | None = None):
        self.seen.append(messages)
        secret = messages[0]["content"].split("thinking of: ")[1].split(".")[0]
        text = "No."
        if secret in messages[-1]["content"]:
            text = f"Yes! You got it: it is {secret}. ###DONE###"
        return ChatResponse({"role": "assistant", "content": text}, "stop", Usage(100, 7))

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("secret_guessed", [True, False])
async def test_a_model_can_play_the_user(secret_guessed: bool) -> None:
    user = UserModel()
    env = load_environment(num_eval_examples=1, max_questions=3, user="unused")
    env.harness.user._client = user
    secret = env.get_eval_tasks()[0].answer

    def policy(messages: list[dict]) -> str:
        return f"Is it {secret}?" if secret_guessed else "Is it a unicorn?"

    [record] = await run_rollouts(env, PolicyClient(policy), n=1)
    view = user.seen[0]
    assert view[0]["role"] == "system" and secret in view[0]["content"]
    assert view[-1] == {"role": "user", "content": policy([])}  # the model's turn, flipped
    assert record.metrics["solved"] == (1.0 if secret_guessed else 0.0)
    assert record.metrics["questions"] == (1.0 if secret_guessed else 3.0)
    # the user model's tokens are not the rollout's
    assert record.usage.completion_tokens < 7 * len(user.seen)
