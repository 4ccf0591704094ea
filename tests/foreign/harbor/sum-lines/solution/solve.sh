#!/bin/bash
# A wrong solution (it counts the lines instead of adding them): the verifier scores it 0.
wc -l < numbers.txt > sum.txt
