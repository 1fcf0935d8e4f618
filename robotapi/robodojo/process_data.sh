#!/usr/bin/env bash
echo "PyRUA_Lean has no training data: the policy is an LLM agent writing Python cells." >&2
