#!/bin/sh
# AgentScope 2.0.11 in its own venv (git-ignored), for benchmarks/peers/driver.py.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
venv="$here/.venv-agentscope"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet 'agentscope==2.0.11'
"$venv/bin/python" -c 'import agentscope; print("agentscope", agentscope.__version__, "in", "'"$venv"'")'
