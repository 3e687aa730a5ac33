"""How long to wait before retrying a failed HTTP call.

The callers' retry loops (chat models, embedding models) differ in what they may retry; the
wait is the same rule everywhere: the provider's ``Retry-After`` when it sent one, else the
configured delay, always capped.
"""

from __future__ import annotations

import random

__all__ = ["backoff_delay"]

#: The largest backoff exponent used: ``2.0**1024`` overflows a float, and any realistic
#: ``retry_delay`` times ``2**1000`` is far past any ``max_retry_delay`` anyway.
_MAX_BACKOFF_EXPONENT = 1000


def backoff_delay(
    attempt: int,
    *,
    retry_delay: float,
    max_retry_delay: float,
    retry_after: float | None = None,
    exponential: bool = True,
) -> float:
    """Seconds to wait before retry number ``attempt + 1``.

    ``retry_after`` (the provider's ``Retry-After``) wins, capped at ``max_retry_delay``.
    Otherwise ``exponential`` doubles ``retry_delay`` per attempt with 0-25 % jitter (so
    clients that failed together do not retry together), capped; without it the wait is
    ``retry_delay``, capped.  The exponent is bounded before the power is taken
    (``2.0**1024`` raises ``OverflowError``); a product that overflows to ``inf`` is capped.
    """
    if retry_after is not None:
        return max(0.0, min(retry_after, max_retry_delay))
    if not exponential:
        return min(retry_delay, max_retry_delay)
    base = retry_delay * 2.0 ** min(attempt, _MAX_BACKOFF_EXPONENT)
    return min(max_retry_delay, base * random.uniform(1.0, 1.25))
