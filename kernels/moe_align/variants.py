"""Register the moe_align variants in teaching order (the torch baseline is registered with the contract)."""
