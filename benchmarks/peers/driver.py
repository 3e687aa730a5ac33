"""trioagent against AgentScope 2.0.11, side by side: rounds interleaved, best, spread, ratio.

Each round runs every wanted row once on trioagent's side (this interpreter, under trio) in
each consumer idiom (``reply(on_event=...)``, then pulling ``agent.stream()``) and once on
AgentScope's (``benchmarks/.venv-agentscope``, under asyncio), each in a fresh process; which
side goes first alternates.  The table gives, per row, the best round of each, the spread
((worst - best) / best over the rounds) and the ratios trioagent / AgentScope against the
goal, for both idioms.  The real-HTTP rows talk to a loopback SSE server in another process.

Run: ``just bench-peers`` or ``python benchmarks/peers/driver.py [--rounds N] [--rows a,b]``
(after ``benchmarks/peers/install_agentscope.sh``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import _rows as R

HERE = Path(__file__).resolve().parent
AGENTSCOPE_PYTHON = HERE.parent / ".venv-agentscope" / "bin" / "python"


def run_side(python: Path | str, script: list[str], rows: list[str], port: int) -> dict[str, float]:
    out = subprocess.run(
        [str(python), str(HERE / script[0]), ",".join(rows), "--port", str(port), *script[1:]],
        capture_output=True,
        text=True,
        cwd=HERE,
    )
    if out.returncode:
        sys.exit(f"{script[0]} failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def table(
    trio: dict[str, list[float]], pull: dict[str, list[float]], peer: dict[str, list[float]]
) -> list[str]:
    lines = [
        "| workload | unit | trioagent on_event | spread | trioagent pull | spread | "
        "AgentScope | spread | ratio on_event | ratio pull | goal |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in R.ROWS:
        if not trio.get(row.key) or not pull.get(row.key) or not peer.get(row.key):
            continue
        best = max if row.higher_is_better else min
        worst = min if row.higher_is_better else max

        def spread(values: list[float], best: Any = best, worst: Any = worst) -> float:
            return abs(worst(values) - best(values)) / best(values) * 100

        t, p, a = best(trio[row.key]), best(pull[row.key]), best(peer[row.key])
        goal = ""
        if row.goal is not None:
            sign = ">=" if row.higher_is_better else "<="
            met = [r >= row.goal if row.higher_is_better else r <= row.goal for r in (t / a, p / a)]
            verdict = "met" if all(met) else "**not met**" if not any(met) else "met on_event"
            if met == [False, True]:
                verdict = "met pulling"
            goal = f"{sign} {row.goal:g}: {verdict}"
        lines.append(
            f"| {row.label} | {row.unit} | {fmt(t)} | {spread(trio[row.key]):.0f}% | {fmt(p)} | "
            f"{spread(pull[row.key]):.0f}% | {fmt(a)} | {spread(peer[row.key]):.0f}% | "
            f"{t / a:.2f} | {p / a:.2f} | {goal} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--rows", default=",".join(R.ROW_KEYS))
    args = parser.parse_args()
    rows = args.rows.split(",")
    unknown = set(rows) - set(R.ROW_KEYS)
    if unknown:
        parser.error(f"unknown rows: {', '.join(sorted(unknown))}; rows: {', '.join(R.ROW_KEYS)}")
    if not AGENTSCOPE_PYTHON.exists():
        sys.exit(f"{AGENTSCOPE_PYTHON} is missing: run benchmarks/peers/install_agentscope.sh")
    server = subprocess.Popen(
        [sys.executable, str(HERE / "_rows.py"), "serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        trio: dict[str, list[float]] = {k: [] for k in rows}
        pull: dict[str, list[float]] = {k: [] for k in rows}
        peer: dict[str, list[float]] = {k: [] for k in rows}
        sides = [
            (sys.executable, ["side_trioagent.py"], trio),
            (sys.executable, ["side_trioagent.py", "--pull"], pull),
            (AGENTSCOPE_PYTHON, ["side_agentscope.py"], peer),
        ]
        for n in range(args.rounds):
            for python, script, results in sides if n % 2 == 0 else sides[::-1]:
                for key, value in run_side(python, script, rows, port).items():
                    results[key].append(value)
            print(f"round {n + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait()
    print(f"best of {args.rounds} interleaved rounds; ratio = trioagent / AgentScope")
    print("\n".join(table(trio, pull, peer)))


if __name__ == "__main__":
    main()
