"""Memory, fitted: the memory law (:mod:`.memory_fit`), the caching allocator's replay
(:mod:`.allocator`, :mod:`.trace_scaling`, :mod:`.replay_fit`), where a peak goes
(:mod:`.breakdown`) and the largest resident batch (:mod:`.sizing`). Pure functions."""
