"""Evaluation results: `evaluation` (one run, with the hub-computed summary) and
`evaluationbatch` (one gzip JSONL sample blob per pushed batch).

Revision ID: evals_0001
Revises: hub_0001
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = "evals_0001"
down_revision: str | None = "hub_0001"

_str = sqlmodel.sql.sqltypes.AutoString
_time = sqlmodel.sql.sqltypes.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "evaluation",
        sa.Column("id", _str(length=32), nullable=False),
        sa.Column("name", _str(length=256), nullable=False),
        sa.Column("environment_id", _str(length=32), nullable=False),
        sa.Column("version_id", _str(length=32), nullable=False),
        sa.Column("env_version", _str(length=64), nullable=False),
        sa.Column("user_id", _str(length=32), nullable=False),
        sa.Column("model_name", _str(length=256), nullable=False),
        sa.Column("framework", _str(length=64), nullable=False),
        sa.Column("is_public", sa.Boolean(), nullable=False),
        sa.Column("status", _str(length=16), nullable=False),
        sa.Column("tags_json", _str(), nullable=False),
        sa.Column("metadata_json", _str(), nullable=False),
        sa.Column("client_metrics_json", _str(), nullable=False),
        sa.Column("summary_json", _str(), nullable=True),
        sa.Column("sample_count", sa.Integer(), nullable=False),
        sa.Column("mean_reward", sa.Float(), nullable=True),
        sa.Column("stderr", sa.Float(), nullable=True),
        sa.Column("n_examples", sa.Integer(), nullable=False),
        sa.Column("n_rollouts", sa.Integer(), nullable=False),
        sa.Column("n_errors", sa.Integer(), nullable=False),
        sa.Column("created_at", _time(), nullable=False),
        sa.Column("updated_at", _time(), nullable=False),
        sa.Column("finalized_at", _time(), nullable=True),
        sa.ForeignKeyConstraint(["environment_id"], ["environment.id"]),
        sa.ForeignKeyConstraint(["version_id"], ["version.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("evaluation", schema=None) as batch_op:
        batch_op.create_index("ix_evaluation_environment_id", ["environment_id"])
        batch_op.create_index("ix_evaluation_user_id", ["user_id"])
        batch_op.create_index("ix_evaluation_model_name", ["model_name"])

    op.create_table(
        "evaluationbatch",
        sa.Column("id", _str(length=32), nullable=False),
        sa.Column("evaluation_id", _str(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("blob_key", _str(length=255), nullable=False),
        sa.Column("sample_count", sa.Integer(), nullable=False),
        sa.Column("keys_json", _str(), nullable=False),
        sa.Column("created_at", _time(), nullable=False),
        sa.ForeignKeyConstraint(["evaluation_id"], ["evaluation.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("evaluation_id", "seq"),
    )
    with op.batch_alter_table("evaluationbatch", schema=None) as batch_op:
        batch_op.create_index("ix_evaluationbatch_evaluation_id", ["evaluation_id"])


def downgrade() -> None:
    op.drop_table("evaluationbatch")
    op.drop_table("evaluation")
