"""Per-rollout state shared by the harness, hooks, tools and reward functions.

It is a dict (as in verifiers, so `state["my_key"] = …` works for anything an environment
wants to remember) with typed accessors for the keys the SDK itself maintains.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .clients.base import ChatResponse, ToolSpec
from .record import SavedState
from .tasks import Task

Message = dict[str, Any]

IN_RECORD = frozenset(
    {
        "task",
        "prompt",
        "completion",
        "responses",
        "replies",
        "usage",
        "stop_reason",
        "tools",
        "done",
        "trace",
        "simulated",
    }
)
"""State keys a rollout record holds in fields of its own (a replay rebuilds them from
those); every other key is the environment's, saved as the record's `state`."""

SAVED_VALUE_LIMIT = 64 * 1024
"""The most JSON characters one saved key may take (a record stays a line, not a dump)."""

_CALLING: ContextVar[State | None] = ContextVar("prime_env_calling_state", default=None)
"""The rollout whose model call is in progress (see `current_state`)."""


class State(dict[str, Any]):
    """Keys the SDK maintains: task, prompt, completion, responses, replies (where each
    response's message is in prompt + completion), usage, stop_reason, tool_args (hidden tool
    arguments), tools (the schemas last offered to the model), done, simulated (messages a
    simulated user wrote) and, for agent programs, trace (their TraceGraph). Anything else is
    the environment's own."""

    @classmethod
    def new(cls, task: Task, prompt: list[Message]) -> State:
        return cls(
            task=task,
            prompt=prompt,
            completion=[],
            responses=[],
            replies=[],
            usage={"prompt_tokens": 0, "completion_tokens": 0},
            stop_reason=None,
            tool_args={},
            tools=None,
            done=False,
        )

    @property
    def task(self) -> Task:
        return self["task"]

    @property
    def prompt(self) -> list[Message]:
        return self["prompt"]

    @property
    def completion(self) -> list[Message]:
        return self["completion"]

    @property
    def responses(self) -> list[ChatResponse]:
        return self["responses"]

    @property
    def num_turns(self) -> int:
        """Model calls made so far."""
        return len(self["responses"])

    @property
    def tool_args(self) -> dict[str, Any]:
        """Hidden tool arguments (name -> value) injected into tools that declare them."""
        return self["tool_args"]

    @property
    def tools(self) -> list[ToolSpec] | None:
        """The tool schemas offered on the last model call (None when none were)."""
        return self.get("tools")

    @property
    def stop_reason(self) -> str | None:
        return self["stop_reason"]

    @stop_reason.setter
    def stop_reason(self, value: str | None) -> None:
        self["stop_reason"] = value

    @property
    def done(self) -> bool:
        """Set `state.done = True` (or `state["done"] = True`) to end the episode."""
        return bool(self["done"])

    @done.setter
    def done(self, value: bool) -> None:
        self["done"] = value

    @property
    def completion_tokens(self) -> int:
        return int(self["usage"]["completion_tokens"])

    def saved(self) -> SavedState:
        """The environment's own keys as plain JSON, each kept only when it reads back equal
        (a tuple would come back a list, a live object not at all): what a replay restores."""
        saved = SavedState()
        for key, value in self.items():
            if key in IN_RECORD or (key == "tool_args" and not value):  # State.new's own
                continue
            try:
                text = json.dumps(value, allow_nan=False)
                same = json.loads(text) == value and type(json.loads(text)) is type(value)
            except (TypeError, ValueError, RecursionError):
                saved.unsaved[key] = f"a {type(value).__name__}, not plain JSON"
                continue
            if not same:
                saved.unsaved[key] = f"a {type(value).__name__} that JSON does not keep as it is"
            elif len(text) > SAVED_VALUE_LIMIT:
                saved.unsaved[key] = f"{len(text)} characters of JSON (over {SAVED_VALUE_LIMIT})"
            else:
                saved.values[key] = value
        return saved

    def add_response(self, response: ChatResponse) -> Message:
        """Record one model call: its message joins the completion, its usage the totals."""
        message = dict(response.message)
        message.setdefault("role", "assistant")
        if message.get("content") is None and not message.get("tool_calls"):
            message["content"] = ""
        self["responses"].append(response)
        self["replies"].append(len(self["prompt"]) + len(self["completion"]))
        self["completion"].append(message)
        self["usage"]["prompt_tokens"] += response.usage.prompt_tokens
        self["usage"]["completion_tokens"] += response.usage.completion_tokens
        return message


def current_state() -> State | None:
    """The state of the rollout whose model call is in progress in this task, else None.

    `model_call` sets it around each call a harness or the interception server makes, so a
    client that plays a policy in-process (prime_env.reference) sees the task it answers;
    network clients never need it."""
    return _CALLING.get()


@contextmanager
def model_call(state: State, tools: list[ToolSpec] | None) -> Iterator[None]:
    """Around one model call of this rollout: `tools` (when offered) become the state's last
    offered tools, and `current_state()` is `state`."""
    if tools is not None:
        state["tools"] = tools
    token = _CALLING.set(state)
    try:
        yield
    finally:
        _CALLING.reset(token)
