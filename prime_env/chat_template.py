"""Chats rendered through a tokenizer's chat template, tool calls included, as `local/` models see them.

The one rendering of a transcript for a Hugging Face tokenizer (duck-typed: nothing here imports
transformers): the local model's prompts (local_model), the reference policies' tool-call text
(prime_env.reference) and the SFT export's token ids (prime_env.sft) all go through it, so a
trace exported for training is tokenised exactly as the model saw its prompt. `bridge_ids`
continues a sampled turn token for token (the trace graph's branches).

SmolLM2's GGUF carries a plain ChatML template: `apply_chat_template(..., tools=...)` drops the
tools without a word, so an environment's tool schemas would never reach the model. When a
template is found not to render tools (probed once per template), the tools are written into
the system prompt the way Hermes/Qwen-style templates do, and tool results are wrapped in
`<tool_response>` so the model sees the same convention both ways. It is only a change to the
messages: the prompt ids still come from the tokenizer on the rendered text.

Tool calls are read in both forms seen in the wild: the Hermes object
`<tool_call>{"name": ..., "arguments": ...}</tool_call>` and SmolLM2's documented list
`<tool_call>[{"name": ..., "arguments": {...}}, ...]</tool_call>`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from prime_env.clients.base import Message, ToolSpec

TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)

_PROBE_NAME = "prime_probe_tool_7f3a"
_PROBE_TOOL: ToolSpec = {
    "type": "function",
    "function": {"name": _PROBE_NAME, "description": "probe", "parameters": {"type": "object"}},
}
_renders_tools: dict[str, bool] = {}
"""Per chat template text: whether it writes the `tools` it is given into the prompt."""


def template_renders_tools(tokenizer: Any) -> bool:
    """Whether `tokenizer`'s chat template puts the tool schemas into the prompt (cached)."""
    template = str(getattr(tokenizer, "chat_template", None))
    if template not in _renders_tools:
        probe = [{"role": "user", "content": "hello"}]
        try:
            text = tokenizer.apply_chat_template(probe, tools=[_PROBE_TOOL], tokenize=False)
        except Exception:  # noqa: BLE001 - a template that fails on tools does not render them
            text = ""
        _renders_tools[template] = _PROBE_NAME in str(text)
    return _renders_tools[template]


def tools_system_block(tools: list[ToolSpec]) -> str:
    """The Hermes/Qwen2.5 tool instructions: the JSON schemas and the call format."""
    schemas = "\n".join(json.dumps(tool) for tool in tools)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{schemas}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments "
        "within <tool_call></tool_call> XML tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def with_tools(
    tokenizer: Any, messages: list[dict[str, str]], tools: list[ToolSpec] | None
) -> tuple[list[dict[str, str]], list[ToolSpec] | None]:
    """The messages and `tools` argument to render: unchanged when the template handles tools;
    otherwise `tools_as_text`, with no `tools` left to drop."""
    has_tool_turns = any(m["role"] == "tool" for m in messages)
    if (not tools and not has_tool_turns) or template_renders_tools(tokenizer):
        return messages, tools or None
    return tools_as_text(messages, tools), None


def tools_as_text(
    messages: list[dict[str, str]], tools: list[ToolSpec] | None
) -> list[dict[str, str]]:
    """The schemas go into the system message (merged into one already there) and each tool
    result becomes a Hermes `<tool_response>` turn: a chat any template renders with its tools."""
    out = [
        {"role": "tool", "content": f"<tool_response>\n{m['content']}\n</tool_response>"}
        if m["role"] == "tool"
        else dict(m)
        for m in messages
    ]
    if tools:
        block = tools_system_block(tools)
        if out and out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{block}" if out[0]["content"] else block
        else:
            out.insert(0, {"role": "system", "content": block})
    return out


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    """One tool call as the model writes it: `<tool_call>{"name": ..., "arguments": ...}</tool_call>`."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def template_messages(messages: list[Message]) -> list[dict[str, str]]:
    """Flatten OpenAI messages to role/content strings a plain ChatML template can render: an
    assistant turn's tool calls become `<tool_call>{"name": ..., "arguments": ...}</tool_call>`
    text after its content, the form `parse_tool_calls` reads back."""
    flat = []
    for message in messages:
        content = message.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if p.get("type") == "text")
        for call in message.get("tool_calls") or []:
            function = call["function"]
            content += tool_call_text(function["name"], json.loads(function["arguments"] or "{}"))
        flat.append({"role": message["role"], "content": content})
    return flat


def rendered_messages(
    tokenizer: Any, messages: list[Message], tools: list[ToolSpec] | None
) -> tuple[list[dict[str, str]], list[ToolSpec] | None]:
    """The messages and `tools` argument `tokenizer.apply_chat_template` is given for this chat."""
    return with_tools(tokenizer, template_messages(messages), tools)


def prompt_ids(tokenizer: Any, messages: list[Message], tools: list[ToolSpec] | None) -> list[int]:
    """The prompt's token ids, as the tokenizer renders the chat (with the tools written into
    the system prompt when its template would drop them)."""
    flat, tools_arg = rendered_messages(tokenizer, messages, tools)
    return list(
        tokenizer.apply_chat_template(
            flat, tools=tools_arg, add_generation_prompt=True, tokenize=True, return_dict=False
        )
    )


_ANCHOR = [
    {"role": "system", "content": "S"},
    {"role": "user", "content": "U"},
    {"role": "assistant", "content": "A"},
]
"""A conversation ending in an assistant turn: what the template renders after it is what
follows any sampled completion."""


def bridge_ids(
    tokenizer: Any, completion_ids: list[int], messages: list[Message], tools: list[ToolSpec] | None
) -> list[int] | None:
    """The tokens that follow `completion_ids` (a sampled turn) when `messages` come next: what
    the template writes after an assistant turn's content (its end token, unless the model
    sampled it, and what follows that), then `messages` and the generation prompt, tokenised
    on their own; the ids before are never re-tokenised (as the renderers library's
    `bridge_to_next_turn`). None when the template does not render the conversation
    append-only, so the turn's end cannot be found."""
    eos = tokenizer.eos_token_id
    before, tools_arg = with_tools(tokenizer, [dict(m) for m in _ANCHOR], tools)
    after, _ = with_tools(
        tokenizer, [dict(m) for m in _ANCHOR] + template_messages(messages), tools
    )
    render = tokenizer.apply_chat_template
    head = str(render(before, tools=tools_arg, tokenize=False))
    full = str(render(after, tools=tools_arg, add_generation_prompt=True, tokenize=False))
    end_text = str(tokenizer.decode([eos]))
    end = head.rfind("A" + end_text)
    if not full.startswith(head) or end < 0:
        return None
    # A turn cut by a limit or a stop string did not sample the end token: the prompt closes it.
    closed = bool(completion_ids) and completion_ids[-1] == eos
    turn_end = head[end + 1 + (len(end_text) if closed else 0) :]
    return list(tokenizer.encode(turn_end + full[len(head) :], add_special_tokens=False))


def assistant_message(text: str, new_call_id: Callable[[], str]) -> Message:
    """The assistant message for a reply `text` written with tools offered: its `<tool_call>`
    blocks become OpenAI `tool_calls` (ids from `new_call_id()`), the rest its content."""
    calls, rest = parse_tool_calls(text)
    if not calls:
        return {"role": "assistant", "content": text}
    return {
        "role": "assistant",
        "content": rest.strip() or None,
        "tool_calls": [
            {
                "id": new_call_id(),
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
            }
            for call in calls
        ],
    }


def parse_tool_calls(text: str) -> tuple[list[dict[str, Any]], str]:
    """The `{name, arguments}` calls in `text` and the text left once they are cut out.

    A block holds one object or a list of them; a block that is not valid JSON, or whose
    calls lack a name, is not a call and stays in the text, as a real server would leave it."""
    calls: list[dict[str, Any]] = []
    kept: list[str] = []
    last = 0
    for match in TOOL_CALL.finditer(text):
        block = _calls_in(match.group(1))
        if block is None:
            continue
        calls.extend(block)
        kept.append(text[last : match.start()])
        last = match.end()
    kept.append(text[last:])
    return calls, "".join(kept)


def _calls_in(raw: str) -> list[dict[str, Any]] | None:
    try:
        payload = json.loads(raw)
    except json.JSONDecodeError:
        return None
    items = payload if isinstance(payload, list) else [payload]
    if not items or not all(isinstance(i, dict) and "name" in i for i in items):
        return None
    return [{"name": str(i["name"]), "arguments": i.get("arguments", {})} for i in items]
