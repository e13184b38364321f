"""ElasticFlow's simulator's deadline policies (Gu et al., ASPLOS'23): EDF, Tiresias, Gandiva, Themis, Chronus and
ElasticFlow, on the replay clocks of ``sim.elasticflow.vocabulary``. Importing this package registers them."""

from optim.elasticflow import chronus, edf, elasticflow, gandiva, themis, tiresias  # noqa: F401  (registers them)
