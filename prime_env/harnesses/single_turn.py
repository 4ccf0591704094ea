"""One prompt, one answer: the cheapest harness, for QA and math environments."""

from __future__ import annotations

from ..clients.base import ModelClient, SamplingArgs
from ..state import State
from .base import COMPLETED, LENGTH, Harness, Hook


class SingleTurn(Harness):
    def __init__(
        self,
        system_prompt: str | None = None,
        *,
        timeout: float | None = None,
        setup: Hook | None = None,
        cleanup: Hook | None = None,
    ) -> None:
        super().__init__(
            system_prompt=system_prompt, max_turns=1, timeout=timeout, setup=setup, cleanup=cleanup
        )

    async def run(self, client: ModelClient, state: State, sampling: SamplingArgs) -> None:
        response = await self.generate(client, state, sampling)
        state.stop_reason = LENGTH if response.finish_reason == "length" else COMPLETED
