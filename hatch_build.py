"""Build hook: the wheel carries the example suite as package data (``trioagent/examples``).

Only the regular wheel: an editable install runs the checkout's ``examples/`` in place, so it
gets no copy that could go stale.
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class ExamplesInTheWheel(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name == "wheel" and version == "standard":
            build_data["force_include"]["examples"] = "trioagent/examples"
