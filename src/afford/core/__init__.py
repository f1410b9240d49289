"""The base every layer stands on: errors and exit codes, units and their parsing, atomic
file I/O and locks, provenance tags, the published constants, the version, and the rules
for importing a user's own code. Imports nothing else of afford (docs/DESIGN.md section 2).
"""
