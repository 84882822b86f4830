"""Times a PyTorch callable on the GPU the way the project's benchmarks time
their kernels (device/runtime.h, TimeMedianMs): `warmup` untimed calls, then
each of `iters` calls between two CUDA events, and the median (the upper
middle value of the sorted times). Shared by the families' torch_baseline.py
scripts, which run on the GPU machine next to the project's benchmarks.
"""
import os
import sys

import torch


def median_ms(fn, iters=30, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]
