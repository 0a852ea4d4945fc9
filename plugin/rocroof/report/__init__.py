"""Stage 5, report: stored runs for people.

* :mod:`.tables` - per-op/kernel/dispatch/invocation reports as a table, CSV, JSON, Markdown or HTML;
* :mod:`.plot` - the roofline plot (matplotlib);
* :mod:`.graph` - a stored op graph as Graphviz DOT;
* :mod:`.diff` - two runs compared per ggml op, noise told apart.

It reads the database through :class:`rocroof.store.Store` and uses :mod:`rocroof.analysis`.
"""
