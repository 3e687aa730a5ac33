"""The tool-side state: the read cache (fresh by modification time, least recently used
evicted first, by count and by size) and the task records, which round-trip with the agent
state."""

from __future__ import annotations

from trioagent.agent import AgentState
from trioagent.serialization import dumps, loads
from trioagent.tool import Task, ToolContext


def test_a_hit_needs_the_same_mtime_and_refreshes_the_order() -> None:
    cache = ToolContext()
    cache.cache_file("/a", ["x\n"], 1.0)
    cache.cache_file("/b", ["y\n"], 2.0)
    hit = cache.get_cache("/a", 1.0)
    assert hit is not None
    assert hit.lines == ["x\n"]
    assert [e.file_path for e in cache.read_file_cache] == ["/b", "/a"]
    assert cache.get_cache("/b", 3.0) is None  # changed since: dropped
    assert [e.file_path for e in cache.read_file_cache] == ["/a"]
    assert cache.get_cache("/a", None) is None
    assert cache.get_cache("/missing", 1.0) is None


def test_eviction_by_count_and_size() -> None:
    cache = ToolContext(max_cache_files=2, max_cache_bytes=20000)
    for i in range(3):
        cache.cache_file(f"/{i}", ["x"], float(i))
    assert [e.file_path for e in cache.read_file_cache] == ["/1", "/2"]
    big = ["y" * 1024] * 15000  # 15000 KiB
    cache.cache_file("/big", big, 9.0)
    cache.cache_file("/big2", big, 9.0)
    assert [e.file_path for e in cache.read_file_cache] == ["/big2"]
    cache.cache_file("/huge", ["z" * 1024] * 30000, 9.0)  # over the whole budget: not cached
    assert [e.file_path for e in cache.read_file_cache] == ["/big2"]


def test_recaching_a_file_replaces_its_entry() -> None:
    cache = ToolContext()
    cache.cache_file("/a", ["1"], 1.0)
    cache.cache_file("/a", ["2"], 2.0)
    (entry,) = cache.read_file_cache
    assert entry.lines == ["2"]
    assert entry.updated_at == 2.0


def test_state_round_trip() -> None:
    state = AgentState()
    state.tool_context.cache_file("/a", ["x\n"], 5.0)
    state.tasks_context.tasks.append(Task(subject="s", id="1", blocks=["2"], state="in_progress"))
    again = loads(dumps(state), AgentState)
    assert again.tool_context == state.tool_context
    assert again.tasks_context == state.tasks_context
