"""Rollout records become SFT data: chosen by the environment's own rewards, as chats or tokens.

`select_records` keeps scored rollouts (never error records) at or above a reward, drops
repeated transcripts and keeps the best K per task. `chat_samples` is a record's chats, one
per conversation it holds (`conversations`: one for a linear rollout, one per branch of an agent
program's trace graph, as training takes one sample per branch), each `{"messages", "tools"}`
in one of two forms:
- `openai`: the messages as the run recorded them (`tool_calls`, `role: tool`) and the tool
  schemas, for chat templates that render tools (Qwen, Llama 3.1, Hermes);
- `text`: every message plain role/content, tools and calls written as the `local/` models see
  them (prime_env.chat_template: schemas in the system message, `<tool_call>`,
  `<tool_response>`), for templates that do not (SmolLM2's).
`token_sample` renders a chat through a tokenizer exactly as `local/` models render their
prompts and marks what to train: each assistant turn's tokens through its end-of-turn token.

The trainer's SFT (trainer_bridge) and `prime eval export` both build on these functions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from registry_index.errors import InvalidEnvRef
from registry_index.resolve import parse_env_id

from .chat_template import rendered_messages, template_messages, tools_as_text
from .clients.base import Message, ToolSpec
from .record import RolloutRecord
from .trace_graph import path_messages

ToolsAs = Literal["openai", "text"]
TOOLS_AS: tuple[ToolsAs, ...] = ("openai", "text")


@dataclass
class Selection:
    """The records kept, and how many each rule left out (in the order the rules apply)."""

    kept: list[RolloutRecord] = field(default_factory=list)
    read: int = 0
    errors: int = 0
    zero_reward: int = 0
    below_min_reward: int = 0
    duplicates: int = 0
    beyond_best_of: int = 0


def select_records(
    records: Iterable[RolloutRecord],
    *,
    min_reward: float | None = None,
    best_of: int | None = None,
    dedup: bool = True,
    zero_reward: bool = True,
) -> Selection:
    """Error records never (an outage is no example); rewards of 0 only with `zero_reward`
    (an answer the environment did not reward is rarely one to imitate); then rewards ≥
    `min_reward`; then one of each transcript (`dedup`); then the `best_of` highest rewards of
    each task (earlier first on ties). The kept records stay in the order they were read."""
    if best_of is not None and best_of < 1:
        raise ValueError(f"best_of must be at least 1, got {best_of}")
    selection = Selection()
    seen: set[str] = set()
    candidates: list[RolloutRecord] = []
    for record in records:
        selection.read += 1
        if record.error is not None or record.reward is None:
            selection.errors += 1
        elif not zero_reward and record.reward == 0:
            selection.zero_reward += 1
        elif min_reward is not None and record.reward < min_reward:
            selection.below_min_reward += 1
        elif dedup and (key := transcript_key(record)) in seen:
            selection.duplicates += 1
        else:
            if dedup:
                seen.add(key)
            candidates.append(record)
    if best_of is None:
        selection.kept = candidates
        return selection
    by_task: dict[tuple[str, str], list[int]] = {}
    for position, record in enumerate(candidates):
        by_task.setdefault((record.env, record.task_id), []).append(position)
    keep: set[int] = set()
    for positions in by_task.values():
        ranked = sorted(positions, key=lambda p: (-(candidates[p].reward or 0.0), p))
        keep.update(ranked[:best_of])
    selection.kept = [r for p, r in enumerate(candidates) if p in keep]
    selection.beyond_best_of = len(candidates) - len(selection.kept)
    return selection


def transcript_key(record: RolloutRecord) -> str:
    """What makes two rollouts the same example: the task, the transcript and the tools, with
    tool-call ids numbered by position (providers draw them at random)."""
    ids: dict[str, str] = {}
    messages = []
    for message in [*record.prompt, *record.completion]:
        message = dict(message)
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                ids.setdefault(str(call.get("id")), f"call_{len(ids)}")
                calls.append({**call, "id": ids[str(call.get("id"))]})
            message["tool_calls"] = calls
        if message.get("tool_call_id") is not None:
            message["tool_call_id"] = ids.get(str(message["tool_call_id"]), "?")
        messages.append(message)
    payload = [_unversioned(record.env), record.task_id, messages, record.tools]
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _unversioned(env: str) -> str:
    """The environment without its version (the same transcript under two versions is one);
    an id that is not a reference (a local path) as it is."""
    try:
        owner, name, _ = parse_env_id(env)
    except InvalidEnvRef:
        return env
    return f"{owner}/{name}" if owner else name


def conversations(record: RolloutRecord) -> list[list[Message]]:
    """The conversations a record holds: its transcript, or for a trace graph with several
    branches (a subagent, an edited or compacted history) each branch from its root through its
    last call's reply: a subagent's chat is never mixed into its caller's."""
    messages = [*record.prompt, *record.completion]
    trace = record.trace
    if trace is None:
        return [messages]
    continued = {call.parent for call in trace.calls if call.parent is not None}
    leaves = [call for i, call in enumerate(trace.calls) if i not in continued]
    if len(leaves) <= 1:
        return [messages]
    return [path_messages(messages, trace.parents, leaf.reply) for leaf in leaves]


def chat_messages(messages: list[Message]) -> list[Message]:
    """A conversation as OpenAI chat messages: string content (never None, so every chat
    template renders it), tool calls and tool results as recorded."""
    out = []
    for message in messages:
        clean: Message = {"role": message["role"], "content": _text(message.get("content"))}
        if message.get("tool_calls"):
            clean["tool_calls"] = [
                {
                    "id": str(call.get("id", "")),
                    "type": "function",
                    "function": {
                        "name": call["function"]["name"],
                        "arguments": call["function"].get("arguments") or "{}",
                    },
                }
                for call in message["tool_calls"]
            ]
        if message["role"] == "tool":
            clean["tool_call_id"] = str(message.get("tool_call_id", ""))
            clean["name"] = str(message.get("name", ""))
        out.append(clean)
    return out


def chat_samples(record: RolloutRecord, tools_as: ToolsAs = "openai") -> list[dict[str, Any]]:
    """`{"messages", "tools"}` for each of a record's conversations. `tools` is the schemas as
    one JSON string (TRL reads it so; a column of schemas would be merged into one struct by
    Arrow, every tool gaining the others' parameters as nulls), absent in the `text` form."""
    if tools_as not in TOOLS_AS:
        raise ValueError(f"tools_as must be one of {TOOLS_AS}, got {tools_as!r}")
    samples: list[dict[str, Any]] = []
    for conversation in conversations(record):
        messages = chat_messages(conversation)
        if tools_as == "text":
            samples.append({"messages": tools_as_text(template_messages(messages), record.tools)})
        else:
            tools = json.dumps(record.tools) if record.tools else None
            samples.append({"messages": messages, "tools": tools})
    return samples


@dataclass(frozen=True)
class TokenSample:
    """One chat as token ids; `loss_mask[i]` is 1 where `input_ids[i]` is the model's to learn."""

    input_ids: list[int]
    loss_mask: list[int]

    @property
    def num_loss_tokens(self) -> int:
        return sum(self.loss_mask)


class RenderError(ValueError):
    """The chat template renders a conversation's prefix differently from the whole (it rewrites
    earlier turns, e.g. drops reasoning), so turns cannot be marked by prefix."""


def token_sample(
    tokenizer: Any, messages: list[Message], tools: list[ToolSpec] | None
) -> TokenSample:
    """`messages` (OpenAI form) rendered by `tokenizer` as a `local/` model's prompt is
    (`prompt_ids`), each assistant turn marked from its first token through the tokenizer's
    end-of-turn (EOS) token: not its header, not what the template appends after it."""
    flat, tools_arg = rendered_messages(tokenizer, messages, tools)
    eos = tokenizer.eos_token_id

    def render(upto: int, header: bool) -> list[int]:
        return list(
            tokenizer.apply_chat_template(
                flat[:upto],
                tools=tools_arg,
                add_generation_prompt=header,
                tokenize=True,
                return_dict=False,
            )
        )

    ids: list[int] = []
    mask: list[int] = []

    def extend(rendered: list[int], trained: bool) -> None:
        if rendered[: len(ids)] != ids:
            raise RenderError(
                "the chat template renders this conversation's earlier turns differently once "
                "later ones follow, so its assistant turns cannot be marked; export it as chat "
                "(without --tokens) and let the trainer render it"
            )
        new = rendered[len(ids) :]
        end = new.index(eos) + 1 if trained and eos in new else len(new)
        ids.extend(new)
        mask.extend([1 if trained else 0] * end + [0] * (len(new) - end))

    for i, message in enumerate(flat):
        if message["role"] == "assistant":
            extend(render(i, header=True), trained=False)
            extend(render(i + 1, header=False), trained=True)
    extend(render(len(flat), header=False), trained=False)
    return TokenSample(ids, mask)


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if p.get("type") == "text")
    return str(content)
