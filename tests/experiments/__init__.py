"""Tests of the lab: scenarios, sweeps, results, reports, plots and the command line."""
