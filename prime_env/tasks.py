"""Tasks and task sets: the data half of an environment.

A `TaskSet` is an immutable, materialised sequence. Every view (`shuffle`, `head`, `split`)
returns a new TaskSet, so an eval and a training run built from the same environment with
the same seed see the same tasks in the same order.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, overload

from .errors import DatasetError

Message = dict[str, Any]

_RESERVED = {"prompt", "question", "answer", "info", "id", "task_id"}


@dataclass(frozen=True)
class Task:
    """One example: the opening messages, an optional reference answer and free-form info.

    `id` is stable across shuffles (taken from the record, else a content hash), so results
    from different runs can be joined on it.
    """

    prompt: list[Message]
    answer: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", _content_id(self.prompt, self.answer, self.info))

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Task:
        """Build a task from a dict with `prompt` (messages or text) or `question` (text).

        Keys other than prompt/question/answer/info/id are kept in `info`, so a CSV's extra
        columns stay reachable from reward functions.
        """
        if "prompt" in record and record["prompt"] is not None:
            prompt = _as_messages(record["prompt"])
        elif "question" in record and record["question"] is not None:
            prompt = [{"role": "user", "content": str(record["question"])}]
        else:
            raise ValueError(
                f"task record has neither 'prompt' nor 'question' (keys: {sorted(record)}); "
                "give the model's input as 'prompt' (text or chat messages) or 'question' (text)"
            )
        info = _as_info(record.get("info"))
        info.update({k: v for k, v in record.items() if k not in _RESERVED})
        raw_id = record.get("id", record.get("task_id"))
        return cls(
            prompt=prompt,
            answer=record.get("answer"),
            info=info,
            id="" if raw_id is None else str(raw_id),
        )


def _as_messages(prompt: Any) -> list[Message]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, Sequence) and all(isinstance(m, Mapping) and "role" in m for m in prompt):
        return [dict(m) for m in prompt]
    raise ValueError(
        "'prompt' must be a string or a list of chat messages like "
        f"{{'role': 'user', 'content': '...'}}, got {type(prompt).__name__}"
    )


def _as_info(info: Any) -> dict[str, Any]:
    # verifiers stores info as a JSON string when rows differ in schema; accept both.
    if info is None or info == "":
        return {}
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except json.JSONDecodeError as exc:
            raise ValueError(f"'info' is a string but not JSON: {exc}") from exc
    if not isinstance(info, Mapping):
        raise ValueError(  # noqa: TRY004 - bad task data
            f"'info' must be a dict (or a JSON object string), got {type(info).__name__}"
        )
    return dict(info)


def _content_id(prompt: list[Message], answer: Any, info: dict[str, Any]) -> str:
    blob = json.dumps([prompt, answer, info], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class TaskSet(Sequence[Task]):
    """An ordered, immutable collection of tasks with deterministic views."""

    def __init__(self, tasks: Iterable[Task]) -> None:
        self._tasks: tuple[Task, ...] = tuple(tasks)
        for task in self._tasks:
            if not isinstance(task, Task):
                raise TypeError(f"TaskSet holds Task objects, got {type(task).__name__}")

    # --- loaders -------------------------------------------------------------------------
    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> TaskSet:
        tasks = []
        for index, record in enumerate(records):
            try:
                tasks.append(Task.from_record(record))
            except ValueError as exc:
                raise ValueError(f"record {index}: {exc}") from exc
        return cls(tasks)

    @classmethod
    def from_jsonl(cls, path: str | Path) -> TaskSet:
        records = []
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
        return cls.from_records(records)

    @classmethod
    def from_json(cls, path: str | Path) -> TaskSet:
        """A JSON list of records, or an object whose `data` (or `tasks`) key holds the list."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
        if isinstance(data, Mapping):
            for key in ("data", "tasks"):
                if isinstance(data.get(key), list):
                    data = data[key]
                    break
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a list of task records (or {{'data': [...]}})")  # noqa: TRY004 - bad task data
        return cls.from_records(data)

    @classmethod
    def from_csv(cls, path: str | Path) -> TaskSet:
        with open(path, encoding="utf-8", newline="") as fh:
            return cls.from_records(list(csv.DictReader(fh)))

    @classmethod
    def from_hf(
        cls,
        dataset: Any,
        split: str | None = None,
        columns: Mapping[str, str] | None = None,
        subset: str | None = None,
    ) -> TaskSet:
        """A Hugging Face dataset: a `datasets` Dataset/DatasetDict, a directory saved with
        `save_to_disk`, or a Hub name (`"org/name"`, `subset` its config) read from the local
        Hugging Face cache (`HF_DATASETS_CACHE`) offline: nothing is ever downloaded.

        `columns` maps dataset columns to task fields, as `rename_columns` does:
        `{"problem": "question", "solution": "answer"}`; other columns go to `info`. `split`
        defaults to "train" when there is one, else the first."""
        if isinstance(dataset, (str, Path)):
            dataset = _read_hf(str(dataset), subset)
        if isinstance(getattr(dataset, "column_names", None), dict):  # a DatasetDict
            splits = list(dataset.keys())
            chosen = split or ("train" if "train" in splits else splits[0])
            if chosen not in splits:
                raise DatasetError(f"split {chosen!r} not in dataset; available: {splits}")
            dataset = dataset[chosen]
        if columns:
            missing = sorted(set(columns) - set(dataset.column_names))
            if missing:
                raise DatasetError(
                    f"columns {missing} are not in the dataset; its columns: {dataset.column_names}"
                )
            dataset = dataset.rename_columns(dict(columns))
        return cls.from_records(dataset)

    @classmethod
    def from_generator(
        cls,
        source: Callable[[], Iterable[Mapping[str, Any] | Task]]
        | Iterable[Mapping[str, Any] | Task],
        n: int | None = None,
    ) -> TaskSet:
        """Materialise records (or Tasks) from a generator; `n` bounds an endless one."""
        items = source() if callable(source) else source
        if n is not None:
            items = islice(items, n)
        return cls(item if isinstance(item, Task) else Task.from_record(item) for item in items)

    # --- views ---------------------------------------------------------------------------
    def shuffle(self, seed: int = 0) -> TaskSet:
        """A permutation that depends only on `seed` and the task count (not on hash randomisation)."""
        order = list(range(len(self._tasks)))
        random.Random(seed).shuffle(order)
        return TaskSet(self._tasks[i] for i in order)

    def head(self, n: int | None) -> TaskSet:
        """The first n tasks; None or a negative n means all."""
        if n is None or n < 0:
            return self
        return TaskSet(self._tasks[:n])

    def split(self, eval_size: float = 0.1, seed: int | None = 0) -> tuple[TaskSet, TaskSet]:
        """(train, eval): shuffled by `seed` (None keeps order); eval_size is a fraction or a count."""
        source = self if seed is None else self.shuffle(seed)
        total = len(source)
        count = round(total * eval_size) if isinstance(eval_size, float) else int(eval_size)
        if not 0 <= count <= total:
            raise ValueError(f"eval_size {eval_size} is outside 0..{total} tasks")
        return TaskSet(source._tasks[: total - count]), TaskSet(source._tasks[total - count :])

    # --- sequence protocol ---------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._tasks)

    @overload
    def __getitem__(self, index: int) -> Task: ...

    @overload
    def __getitem__(self, index: slice) -> TaskSet: ...

    def __getitem__(self, index: int | slice) -> Task | TaskSet:
        if isinstance(index, slice):
            return TaskSet(self._tasks[index])
        return self._tasks[index]

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks)

    def __repr__(self) -> str:
        return f"TaskSet({len(self._tasks)} tasks)"


def as_taskset(tasks: TaskSet | Iterable[Task | Mapping[str, Any]]) -> TaskSet:
    """Accept a TaskSet, a list of Tasks or a list of records wherever an env takes tasks."""
    if isinstance(tasks, TaskSet):
        return tasks
    return TaskSet(t if isinstance(t, Task) else Task.from_record(t) for t in tasks)


def _read_hf(name: str, subset: str | None) -> Any:
    """A local `save_to_disk` directory, or the Hub dataset `name` from the local cache only;
    anything else (a directory of another kind, a file-format builder such as "csv", a dataset
    that fails to load) is a `DatasetError` naming it."""
    import datasets  # optional extra: only needed for this loader
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES as formats

    usage = (
        "from_hf takes a Dataset object, a directory written by Dataset.save_to_disk, or a "
        "Hugging Face dataset name such as 'org/name'"
    )
    if Path(name).exists():
        try:
            return datasets.load_from_disk(name)
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{name}: not a dataset directory ({exc}); {usage}") from None
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise DatasetError(f"{name}: no such directory; {usage}")
    if name in formats:
        loader = "from_jsonl" if name == "json" else f"from_{name}"
        hint = f"TaskSet.{loader}(path)" if name in ("csv", "json") else "load it with datasets"
        raise DatasetError(
            f"{name!r} names a file format of the datasets library, not a dataset: for a file "
            f"use {hint}, then TaskSet.from_hf(the dataset); {usage}"
        )
    with _hf_offline():
        try:
            return datasets.load_dataset(name, subset)
        except (ConnectionError, FileNotFoundError) as exc:
            cache = datasets.config.HF_DATASETS_CACHE
            raise DatasetError(
                f"the Hugging Face dataset {name!r}{f' ({subset})' if subset else ''} is not in "
                f"the local cache ({cache}); nothing is downloaded here. Fetch it once where the "
                f"Hub is reachable (python -c \"import datasets; datasets.load_dataset('{name}')\"),"
                " then point HF_DATASETS_CACHE at that cache, or pass a local directory"
            ) from exc
        except Exception as exc:  # the datasets library's own errors are many and unrelated
            raise DatasetError(
                f"the Hugging Face dataset {name!r}{f' ({subset})' if subset else ''} could not "
                f"be loaded: {type(exc).__name__}: {exc}"
            ) from exc


@contextmanager
def _hf_offline() -> Iterator[None]:
    """HF_HUB_OFFLINE for one load, whatever the process set: `datasets` and `huggingface_hub`
    read their offline switch at call time from these module attributes. Their "using the
    cached version" notes are silenced meanwhile: being offline is the point."""
    import logging

    import datasets
    import huggingface_hub.constants as hub_constants

    saved = (datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE)
    log = logging.getLogger("datasets")
    level = log.level
    datasets.config.HF_HUB_OFFLINE = hub_constants.HF_HUB_OFFLINE = True
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE = saved
        log.setLevel(level)
