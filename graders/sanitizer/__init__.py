"""Stage 4, sanitizer: compute-sanitizer's memcheck, racecheck and synccheck on a small case."""
