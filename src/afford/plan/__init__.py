"""Plans: pure functions from certificates (and platforms, runs) to typed, tagged results."""
