"""`local/<name>` models: a torch + transformers chat model run in this process on CPU.

Apart from `prime_env` so the SDK never imports torch; installed with the SDK's `local` extra.
"""
