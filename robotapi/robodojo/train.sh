#!/usr/bin/env bash
echo "PyRUA_Lean is not trained: pick the model in deploy.yml agent_cmd." >&2
