"""Running user code (rewards, tools, hooks) without blocking the event loop.

verifiers documents that "a 10ms sync call at 2,000 concurrent rollouts serializes into 20
seconds"; here every sync user function runs in a worker thread, async ones are awaited.
The threads come from our own pool, not asyncio's default one: that is capped at
min(32, cores + 4) (6 threads on 2 cores), which would make 128 concurrent rollouts with a
blocking tool (a sandbox exec, an HTTP lookup) queue behind 6 of them.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# Threads are started on demand, so a large cap costs nothing until user code blocks.
_MAX_THREADS = int(os.environ.get("PRIME_ENV_THREADS", "256"))
_executor: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=_MAX_THREADS, thread_name_prefix="prime-env")
    return _executor


def _forget_pool_after_fork() -> None:
    """A forked child (`prime eval run -w N`) inherits the pool object but none of its threads:
    work submitted to it would wait forever. The child starts a pool of its own on demand."""
    global _executor
    _executor = None


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def is_async_callable(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    # a callable object counts as async when its class defines `async def __call__`
    dunder_call = vars(type(fn)).get("__call__")
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(dunder_call)


async def call_user(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Await `fn(*args, **kwargs)`; sync functions run in a worker thread (context preserved)."""
    if is_async_callable(fn):
        return await fn(*args, **kwargs)
    context = contextvars.copy_context()
    call = functools.partial(context.run, fn, *args, **kwargs)
    result = await asyncio.get_running_loop().run_in_executor(_pool(), call)
    if inspect.isawaitable(result):  # a sync wrapper that returned a coroutine
        return await result
    return result
