"""Agent middlewares: the hook base class and the chain's ``NextHandler``."""

from ._base import MiddlewareBase as MiddlewareBase
from ._chain import Emit as Emit, NextHandler as NextHandler

__all__ = ["Emit", "MiddlewareBase", "NextHandler"]
