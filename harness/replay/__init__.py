"""Scale replays: a job trace (harness/scale) submitted to a scheduler with emulated nodes, its records
kept raw, and the queue figures drawn from them."""
