#!/bin/bash
set -euo pipefail
tr '[:lower:]' '[:upper:]' < greeting.txt > shout.txt
