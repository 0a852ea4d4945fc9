"""How reports name where a ceiling came from: the words of ``run.dram_peak_rule`` and the shipped table.

Kept apart from :mod:`rocroof.analysis.peaks` (which reads YAML and imports numpy through
:mod:`rocroof.analysis.dram`) so that :mod:`rocroof.report.render` prints a header without them.
"""

from __future__ import annotations

#: How reports name the shipped table.
SHIPPED_LABEL = "configs/peaks.yaml"

#: How a run's DRAM ceiling was chosen (``run.dram_peak_rule``), best first, and how reports say it.
DRAM_RULES: dict[str, str] = {
    "probe": "measured by rocroof's copy-bandwidth probe",
    "roofline_csv": "measured by rocprofiler-compute's roofline benchmark",
    "capture": "recorded by the capture",
    "table_device": "peaks table, GPU matched by PCI device id",
    "table_name": "peaks table, GPU matched by product name",
    "table_cu": "peaks table, GPU matched by architecture and CU count",
    "table_arch": "peaks table, the architecture's default GPU",
}
