"""Independent implementations the engine is checked against: the Fraction twin and the value-table twin."""
