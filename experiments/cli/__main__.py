"""``python -m experiments.cli``: the ``capsim`` command without its installed script."""

from experiments.cli import console

console()
