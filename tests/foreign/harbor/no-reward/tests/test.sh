#!/bin/bash
# A broken verifier: it checks the work but never writes /logs/verifier/reward.txt (nor
# reward.json), so there is no reward to record; Harbor's own metric would count it as 0.
test -f /app/done && echo "the file is there"
