"""`python -m trainer_bridge.trainer --run-dir DIR`: the trainer process."""

from trainer_bridge.trainer.trainer import main

raise SystemExit(main())
