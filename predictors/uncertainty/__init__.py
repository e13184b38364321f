"""How sure an estimate is: where each answer comes from and its expected error (``provenance``), estimates told
with an error (``noisy``), and estimates that sharpen as a job runs (``online``)."""
