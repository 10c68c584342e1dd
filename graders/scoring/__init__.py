"""Stage 5, scoring: correctness points per case, performance points against the references."""
