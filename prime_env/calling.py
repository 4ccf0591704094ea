"""Running user code (rewards, tools, hooks) without blocking the event loop.

verifiers documents that "a 10ms sync call at 2,000 concurrent rollouts serializes into 20
seconds"; here every sync user function runs in a worker thread, async ones are awaited.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import Any


def is_async_callable(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    # a callable object counts as async when its class defines `async def __call__`
    dunder_call = vars(type(fn)).get("__call__")
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(dunder_call)


async def call_user(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Await `fn(*args, **kwargs)`; sync functions run off the loop via asyncio.to_thread."""
    if is_async_callable(fn):
        return await fn(*args, **kwargs)
    result = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(result):  # a sync wrapper that returned a coroutine
        return await result
    return result
