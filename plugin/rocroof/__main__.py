"""``python -m rocroof``: the same command line as the ``rocroof`` script."""

from .cli import main

main()
