"""The answers lane: what afford answers from inputs it is given (certificates, plans,
ledgers, manifests, readings): plans, sizes, ladders, reports, comparisons, bars and
milestones, on the fakes of tests/ and the recorded inputs of tests/data."""
