"""TRL's GRPOTrainer on the arithmetic recipe's settings: the peer `bench_train.py trl` runs.

Run by `scripts/bench_train.py trl` with the Python of a virtualenv of its own (TRL, torch,
and this checkout's SDK + arithmetic environment installed there), never this checkout's:

    python bench_train_trl.py SETTINGS.json OUT_DIR

SETTINGS.json holds the model directory and the shared settings (problems, group size,
batch, tokens, temperature, LoRA, learning rate and schedule, steps, eval interval, the
reward weights, seed). The rewards are the arithmetic environment's own functions, the
held-out eval is greedy on its eval split, scored by its `correct`. Every eval appends
{step, cpu_s, correct} to OUT_DIR/evals.jsonl, cpu_s counting this process and its children.
TRL keeps its own algorithm defaults (scale_rewards "group", loss "dapo", no KL); a step is
one generation of `batch_size` completions trained in micro-batches of 8 (gradient
accumulation: one optimizer step per generation).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path
from typing import Any


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    import torch
    from arithmetic import SYSTEM_PROMPT, boxed_integer, correct, load_environment
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    settings = json.loads(Path(sys.argv[1]).read_text())
    torch.set_num_threads(settings.get("threads", 1))
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    env = load_environment(**settings["env_args"])

    def prompt(task: Any) -> list[dict[str, str]]:
        return [{"role": "system", "content": SYSTEM_PROMPT}, *task.prompt]

    train = Dataset.from_list([{"prompt": prompt(t), "answer": int(t.answer)} for t in env.tasks])
    held_out = [(prompt(t), int(t.answer)) for t in env.get_eval_tasks()]
    group = settings["rollouts_per_example"]

    def correct_reward(completions: list[Any], answer: list[int], **_: Any) -> list[float]:
        return [correct(c, a) for c, a in zip(completions, answer)]

    def boxed_reward(completions: list[Any], answer: list[int], **_: Any) -> list[float]:
        return [boxed_integer(c, a) for c, a in zip(completions, answer)]

    def shortest_reward(completions: list[Any], answer: list[int], **_: Any) -> list[float]:
        """The env's group reward: each run of `group` completions is one prompt's group."""
        from arithmetic import shortest_correct

        scores: list[float] = []
        for start in range(0, len(completions), group):
            part = slice(start, start + group)
            scores += shortest_correct(completions[part], answer[part])
        return scores

    weights = settings["reward_weights"]
    tokenizer = AutoTokenizer.from_pretrained(settings["model_dir"])
    model = AutoModelForCausalLM.from_pretrained(settings["model_dir"], dtype=torch.float32)
    evals = out / "evals.jsonl"

    def evaluate(step: int, policy: Any) -> None:
        policy.eval()
        texts = [
            tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
            for p, _ in held_out
        ]
        tokenizer.padding_side = "left"
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            ids = policy.generate(
                **batch,
                max_new_tokens=settings["max_tokens"],
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
            )
        replies = tokenizer.batch_decode(
            ids[:, batch["input_ids"].shape[1] :], skip_special_tokens=True
        )
        score = sum(
            correct([{"role": "assistant", "content": r}], a)
            for r, (_, a) in zip(replies, held_out)
        ) / len(held_out)
        line = {
            "step": step,
            "cpu_s": round(cpu_seconds(), 2),
            "correct": score,
            "time": time.time(),
        }
        with evals.open("a") as fh:
            fh.write(json.dumps(line) + "\n")
        policy.train()

    class HeldOut(TrainerCallback):
        def on_train_begin(
            self, args: Any, state: Any, control: Any, model: Any = None, **_: Any
        ) -> None:
            evaluate(0, model)

        def on_step_end(
            self, args: Any, state: Any, control: Any, model: Any = None, **_: Any
        ) -> None:
            step = state.global_step
            if step % settings["eval_interval"] == 0 or step == settings["max_steps"]:
                evaluate(step, model)

    micro = min(8, settings["batch_size"])  # 32 sequences in one pass: 10 GB on CPU
    config = GRPOConfig(
        output_dir=str(out / "trl"),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=settings["batch_size"] // micro,
        num_generations=group,
        max_completion_length=settings["max_tokens"],
        temperature=settings["temperature"],
        learning_rate=settings["lr"],
        lr_scheduler_type=settings["scheduler"],
        max_steps=settings["max_steps"],
        reward_weights=[weights["correct"], weights["shortest_correct"], weights["boxed_integer"]],
        seed=settings["seed"],
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        dataloader_num_workers=0,
    )
    lora = LoraConfig(
        r=settings["lora_rank"],
        lora_alpha=settings["lora_alpha"],
        target_modules=settings["target_modules"],
        task_type="CAUSAL_LM",
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[correct_reward, shortest_reward, boxed_reward],
        args=config,
        train_dataset=train,
        processing_class=tokenizer,
        peft_config=lora,
        callbacks=[HeldOut()],
    )
    trainer.train()
    (out / "log_history.json").write_text(json.dumps(trainer.state.log_history))


if __name__ == "__main__":
    main()
