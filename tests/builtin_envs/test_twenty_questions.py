"""twenty-questions: the scripted user's answers, an oracle that finds every object through real
questions, poor policies that score low, a model-played user, and the user's turns marked."""

from __future__ import annotations

import itertools

import pytest
from twenty_questions import ATTRIBUTES, OBJECTS, answer, load_environment

from prime_env import ChatResponse, SamplingArgs, Usage, run_rollouts, summarize
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


def oracle(messages: list[dict]) -> str:
    """Keeps the objects consistent with every answer so far; asks the question that splits
    them most evenly; guesses when one is left."""
    candidates = set(OBJECTS)
    asked: list[str] = []
    for question, reply in itertools.pairwise(messages):
        if question["role"] != "assistant":
            continue
        text = reply["content"]
        if text.startswith("No, it is not"):
            candidates.discard(text.removeprefix("No, it is not ").split(" ", 1)[1].rstrip("."))
            continue
        name = next(
            n for n, words in ATTRIBUTES.items() if f"Is it {words[0]}?" == question["content"]
        )
        asked.append(name)
        candidates = {c for c in candidates if (name in OBJECTS[c]) == (text == "Yes.")}
    splitting = [
        n
        for n in ATTRIBUTES
        if n not in asked and 0 < sum(n in OBJECTS[c] for c in candidates) < len(candidates)
    ]
    if not splitting:  # one left, or ones no question tells apart: guess them in turn
        return f"Is it a {min(candidates)}?"
    best = min(
        splitting,
        key=lambda n: abs(2 * sum(n in OBJECTS[c] for c in candidates) - len(candidates)),
    )
    return f"Is it {ATTRIBUTES[best][0]}?"


async def test_the_oracle_finds_every_object_through_the_dialogue() -> None:
    env = load_environment(num_eval_examples=20)
    records = await run_rollouts(env, PolicyClient(oracle), n=20, concurrency=4)
    summary = summarize(records)
    assert summary.errors == 0
    assert all(r.metrics["solved"] == 1.0 for r in records)
    assert all(r.stop_reason == "env_done" for r in records)
    assert summary.reward_mean > 0.8
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
