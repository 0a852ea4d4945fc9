"""Profiler backends behind one interface (see :mod:`rocroof.profilers.base`)."""
