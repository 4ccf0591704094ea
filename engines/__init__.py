"""Inference engines that run in processes of their own: where they are installed, how they
are found, started, spoken to and stopped.

vLLM pins its own torch, transformers and torchvision, so it never shares the project's
virtualenv: `prime engine install vllm` puts it into one of its own (install.py), every
`--backend vllm` finds it there or on PATH (install.find_vllm), and its server is started from
that interpreter with the flags that make it token-exact (vllm_server.py). Training
(trainer_bridge.inference), evals (the `vllm` model provider, provider.py) and the Lab call
these modules; none of them imports vLLM itself.
"""
