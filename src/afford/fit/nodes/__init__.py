"""Nodes, fitted: collective bandwidths and the alpha-beta model (:mod:`.collectives_fit`),
data-parallel scaling against world size (:mod:`.dp_scaling`). Pure functions."""
