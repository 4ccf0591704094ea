#!/bin/bash
# Harbor's convention: the verifier writes the reward, 1 or 0, to /logs/verifier/reward.txt.
mkdir -p /logs/verifier
if [ "$(cat /app/shout.txt 2>/dev/null)" = "HELLO FROM THE IMAGE" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
