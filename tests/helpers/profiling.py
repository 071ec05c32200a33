"""Peak bytes of live CPU allocations while a function runs, from torch.profiler's memory
events (shared by the memory tests of the analysis and of the model)."""

from torch.profiler import ProfilerActivity, profile


def profiled_peak_bytes(fn) -> int:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        kept = fn()  # held until the profile ends
    events = sorted((e for e in prof.events() if e.self_cpu_memory_usage), key=lambda e: e.time_range.start)
    live = peak = 0
    for event in events:
        live += event.self_cpu_memory_usage
        peak = max(peak, live)
    del kept
    return peak
