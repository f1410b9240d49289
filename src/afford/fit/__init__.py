"""Laws fitted to readings: pure functions, arrays in, frozen results out (DESIGN section 2)."""
