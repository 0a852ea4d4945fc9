"""Stage 1, analysis: pure models of bytes, FLOPs, ceilings and the op graph.

No file formats and no database: functions of records and frames. Every stage above uses them.

* :mod:`.dram` - DRAM read/write bytes from hardware counters, one formula per GPU architecture;
* :mod:`.model` - modelled bytes and FLOPs per ggml op invocation;
* :mod:`.graph` - the op graph (edges by last writer of a storage id), evaluations, critical path;
* :mod:`.peaks` - DRAM and compute ceilings per GPU (``configs/peaks.yaml``, measured files);
* :mod:`.roofline` - the governing roof of an op and its compute units;
* :mod:`.bandwidth` - the copy-bandwidth probe and its result file;
* :mod:`.tables` - a run's ``op_model``, ``op_edge`` and ``run_ceiling`` rows.
"""
