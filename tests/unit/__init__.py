"""The unit lane: afford's pure parts against values worked by hand and properties
(hypothesis), on fakes and recorded data; and the layout's guardrails. Seconds a file."""
