"""The harness's hybrid GDN model: config, weights, GDN and attention layers, the model."""
