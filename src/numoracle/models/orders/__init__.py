"""The order vocabulary: which terms a reduction adds in which order and format (plain, GPU, CPU and BLAS
orders, explicit trees, presets), their text form, and the schedules they compile to.

Imported by the simulation engine, the bounds, identify and reveal; imports ``core`` only.
"""
