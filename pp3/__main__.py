"""``python -m pp3``: see pp3.cli."""

import sys

from pp3.cli import main

sys.exit(main())
