"""sorting-v1: the user reveals words over several turns; each reply is the sorted list so far.

Built as verifiers' `alphabet_sort` is: the task carries no prompt, and the env's `run()` plays
the scripted user through an interaction, one `turn()` per revealed batch of words."""

import verifiers.v1 as vf

WORDS = ["pear", "fig", "kiwi", "apple", "lime", "plum", "date", "yuzu"]


class SortingData(vf.TaskData):
    turns: list[list[str]]


class SortingTask(vf.Task[SortingData]):
    @vf.reward
    async def sorted_turns(self, trace: vf.Trace) -> float:
        replies = [(m.content or "").strip() for m in trace.assistant_messages]
        seen: list[str] = []
        right = 0
        for i, words in enumerate(self.data.turns):
            seen += words
            if i < len(replies) and replies[i] == " ".join(sorted(seen)):
                right += 1
        return right / len(self.data.turns)

    @vf.metric
    async def turns_answered(self, trace: vf.Trace) -> float:
        return float(len(trace.assistant_messages))


class SortingEnv(vf.SingleAgentEnv):
    """Reveals each task's words turn by turn, as the run's user."""

    async def run(self, task, agents):
        async with agents.agent.interaction(task) as interaction:
            for i, words in enumerate(task.data.turns):
                ask = "Sort these words" if i == 0 else "Add these words and sort them all again"
                prompt = f"{ask}, reply with the words only, space-separated: {' '.join(words)}"
                if (await interaction.turn(prompt)).terminated:
                    break


class SortingTaskset(vf.Taskset[SortingTask, vf.TasksetConfig]):
    def load(self) -> list[SortingTask]:
        return [
            SortingTask(
                SortingData(
                    idx=i,
                    prompt=None,
                    turns=[WORDS[i : i + 2], WORDS[i + 2 : i + 3]],
                ),
                self.config.task,
            )
            for i in range(len(WORDS) - 2)
        ]
