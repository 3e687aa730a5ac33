"""``deep_copy`` against ``copy.deepcopy`` on a conversation history.

The reply path copies the caller's messages (and a model's request, in ``ScriptedModel``) with
trioagent's field-by-field ``deep_copy`` instead of ``copy.deepcopy``.  This measures both on
the same history of alternating user and assistant messages, best of several rounds, and prints
the ratio ``copy.deepcopy`` / ``deep_copy`` (> 1: ``deep_copy`` is faster).

Run: ``python benchmarks/deep_copy.py [--messages N] [--rounds R]``
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable
from typing import Any

from trioagent._core.copying import deep_copy
from trioagent.message import AssistantMsg, Msg, UserMsg


def history(n: int) -> list[Msg]:
    return [UserMsg("user", f"q{i}") if i % 2 else AssistantMsg("a", f"a{i}") for i in range(n)]


def best_ms(fn: Callable[[Any], Any], value: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(value)
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    msgs = history(args.messages)
    assert deep_copy(msgs) == msgs
    ours = best_ms(deep_copy, msgs, args.rounds)
    baseline = best_ms(copy.deepcopy, msgs, args.rounds)
    print(f"history of {args.messages} messages, best of {args.rounds}")
    print(f"  copy.deepcopy  {baseline:8.3f} ms")
    print(f"  deep_copy      {ours:8.3f} ms")
    print(f"  ratio          {baseline / ours:8.2f}x")


if __name__ == "__main__":
    main()
