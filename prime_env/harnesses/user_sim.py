"""Simulated users: a participant the model talks to, played by a model or a script, never trained.

`Conversation(SimulatedUser(...))` is a `MultiTurn` whose environment is the user: after every
model turn the user answers, until it says its stop marker (default `###DONE###`, cut from the
text) or has spoken `max_turns` times. A model-played user sees the conversation from its side
(the model's turns as `user`, its own as `assistant`) under its own prompt; a script gets the
model's view and the state. The user's messages are marked in `state["simulated"]` (the
record's `trace.simulated`): they sit in prompts, never in completions, so training masks them,
and a user model's tokens never count in the rollout's usage: `state["user_usage"]` has them,
with their cost when the model's price is known, and the record's `user_usage` carries them into
the run's tokens and cost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..calling import call_user
from ..clients.base import Message, ModelClient, SamplingArgs
from ..clients.model_specs import ModelSpec
from ..state import State
from .base import Hook
from .multi_turn import MultiTurn

UserScript = Callable[[list[Message], State], str | None | Awaitable[str | None]]
UserPrompt = str | Callable[[State], str]
DONE = "###DONE###"


class SimulatedUser:
    """`model`: a model spec ("openai/gpt-4.1-mini", "local/smollm2-135m") or a ModelClient;
    or `script(messages, state) -> text | None` (None: the user is done). `prompt` is the
    user model's system prompt, a format string over the task's `info` fields and `answer`, or
    a function of the state."""

    def __init__(
        self,
        model: str | ModelClient | None = None,
        *,
        script: UserScript | None = None,
        prompt: UserPrompt = "",
        stop: str = DONE,
        max_turns: int = 8,
        sampling: SamplingArgs | None = None,
    ) -> None:
        if (model is None) == (script is None):
            raise ValueError("SimulatedUser needs exactly one of model= or script=")
        if max_turns < 1:
            raise ValueError("a simulated user's max_turns must be at least 1")
        self.model = model
        self.script = script
        self.prompt = prompt
        self.stop = stop
        self.max_turns = max_turns
        self.sampling = sampling or SamplingArgs()
        self._spec: ModelSpec | None = None
        self._client: ModelClient | None = (
            model if not isinstance(model, (str, type(None))) else None
        )

    def client(self) -> ModelClient:
        if self._client is None:
            from ..clients.model_specs import resolve_model

            assert isinstance(self.model, str)
            spec = resolve_model(self.model)
            self._spec = spec
            self._client = spec.create_client()
        return self._client

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The user model's cost of a call: None for a client given as an object, or a model
        whose price is unknown."""
        return None if self._spec is None else self._spec.cost(prompt_tokens, completion_tokens)

    def system_prompt(self, state: State) -> str:
        if callable(self.prompt):
            return self.prompt(state)
        task = state.task
        return self.prompt.format(**{**task.info, "answer": task.answer}) if self.prompt else ""

    async def reply(self, messages: list[Message], state: State) -> tuple[str, bool]:
        """The user's next message and whether it is done."""
        if self.script is not None:
            text = await call_user(self.script, messages, state)
        else:
            own = self.system_prompt(state)
            view = [{"role": "system", "content": own}] if own else []
            view += _flipped(messages)
            response = await self.client().chat(view, sampling=self.sampling)
            usage = state.setdefault(
                "user_usage", {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
            )
            used = (response.usage.prompt_tokens, response.usage.completion_tokens)
            usage["prompt_tokens"] += used[0]
            usage["completion_tokens"] += used[1]
            cost = self._cost(*used)
            usage["cost_usd"] = (
                None if cost is None or usage["cost_usd"] is None else (usage["cost_usd"] + cost)
            )
            text = response.message.get("content") or ""
        if text is None:
            return "", True
        done = self.stop in text
        return text.replace(self.stop, "").strip(), done


class Conversation(MultiTurn):
    """The model talks with a simulated user until the user is done or `max_turns` model turns."""

    def __init__(
        self,
        user: SimulatedUser,
        system_prompt: str | None = None,
        max_turns: int = 10,
        *,
        max_tokens_total: int | None = None,
        timeout: float | None = None,
        setup: Hook | None = None,
        cleanup: Hook | None = None,
    ) -> None:
        super().__init__(
            self._user_turn,
            max_turns=max_turns,
            system_prompt=system_prompt,
            max_tokens_total=max_tokens_total,
            timeout=timeout,
            setup=setup,
            cleanup=cleanup,
        )
        self.user = user

    async def _user_turn(self, messages: list[Message], state: State) -> Message | None:
        text, done = await self.user.reply(messages, state)
        state["user_turns"] = state.get("user_turns", 0) + 1
        if done or state["user_turns"] >= self.user.max_turns:
            state.done = True
        if not text:
            return None
        simulated: list[int] = state.setdefault("simulated", [])
        simulated.append(len(state.prompt) + len(state.completion))  # where it is appended
        return {"role": "user", "content": text}


def _flipped(messages: list[Message]) -> list[Message]:
    """The conversation as the user sees it: the model's turns are what it is told."""
    view: list[Message] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            view.append({"role": "user", "content": message.get("content") or ""})
        elif role == "user":
            view.append({"role": "assistant", "content": message.get("content") or ""})
    if view and view[0]["role"] == "assistant":
        view.insert(0, {"role": "user", "content": "(the conversation starts)"})
    return view
