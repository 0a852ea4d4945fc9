"""Stage 2, capture: profiler runs and profiler files in, normalized records out.

* :mod:`.profilers` - the profiler backends behind one interface (rocprofv3; Nsight Compute + Systems);
* :mod:`.collect` - ``rocroof collect``: plan the passes, run them, keep the raw output;
* :mod:`.readers` - format detection and one reader per format (pure functions of files);
* :mod:`.markers` - the grammar of the llama.cpp hook's roctx/NVTX ranges and ``ggml-fused:`` lines;
* :mod:`.scrub` - a copy of a capture that is safe to share.

It may use :mod:`rocroof.analysis` (counter lists per architecture, ceilings read from files).
"""
