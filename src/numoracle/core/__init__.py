"""The bottom layer: formats, policies, the exact conversion engine and its independent twins."""
