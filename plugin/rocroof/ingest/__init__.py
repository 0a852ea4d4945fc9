"""Stage 3, ingest: a capture becomes the rows of one run.

* :mod:`.attribution` - each kernel dispatch to the ggml op invocation that launched it (roctx/NVTX
  ranges on the launching thread), and counter passes joined to the timing pass;
* :mod:`.pipeline` - :func:`~.pipeline.build_run`: attribution, DRAM bytes, op tables, model rows.

It uses :mod:`rocroof.capture` and :mod:`rocroof.analysis`; :mod:`rocroof.store` writes its result.
"""
