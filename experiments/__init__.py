"""The lab: scenarios and sweeps from YAML, running them, results, tables, plots and the command line."""
