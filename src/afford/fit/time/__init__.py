"""Time, fitted: the step-time model (:mod:`.time_fit`: its features, forms, two sides,
design and noise verdict), the throughput law, warm-up, the phases of a step, launch-bound
verdicts, A/B speedups and the step told apart from host load. Pure functions."""
