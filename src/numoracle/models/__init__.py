"""Accumulation models: orders (which terms are added in which order and format), the schedules they compile to,
and simulate, which runs them bit for bit (numpy reference, compiled kernels optional).

Owns Order and its classes, the GPU orders and presets, OrderSpec (what the bounds read of an order), the exact
accumulation steps and the kernels that run them. Imports only core.
"""
