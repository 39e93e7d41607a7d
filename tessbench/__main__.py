"""python -m tessbench: the tessbench command."""

import sys

from tessbench.cli import main

sys.exit(main())
