"""Laws fitted to readings: pure functions, arrays in, frozen results out (docs/DESIGN.md
section 2)."""
