"""Register the attention variants in teaching order (the torch baseline is registered with the contract)."""
