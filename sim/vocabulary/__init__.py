"""Parts of the floor's vocabulary, split from ``sim.model`` by concern; ``sim.model`` re-exports every name, so the
rooms import them from there."""
