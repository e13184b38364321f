"""``python -m experiments.cli``: the ``capsim`` command without its installed script."""

import sys

from experiments.cli import main

sys.exit(main())
