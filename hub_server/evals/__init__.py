"""Evaluation results: create → samples (batched) → finalize, listing, paged samples, leaderboards.

Samples are stored as gzip-compressed JSONL blobs in the hub's blob store, one blob per
batch, never as one database row each: a single run can hold hundreds of thousands of
rollouts, and the only things the database needs are the summary and where the blobs are.
"""
