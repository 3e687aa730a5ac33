"""Shared internals at the bottom of the layers: ids and timestamps, concurrency helpers.

Nothing here imports any other part of trioagent.
"""
