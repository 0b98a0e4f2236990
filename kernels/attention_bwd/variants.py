"""Register the attention_bwd variants in teaching order (the torch baselines are registered with the contract)."""
