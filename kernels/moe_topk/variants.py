"""Register the moe_topk variants in teaching order (the torch baseline is registered with the contract)."""
