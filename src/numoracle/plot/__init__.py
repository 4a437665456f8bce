"""Plots: bound curves against emulated errors (matplotlib, optional). Above exact, models and bounds."""
