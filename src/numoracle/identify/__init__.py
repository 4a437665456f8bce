"""Identification: which accumulation order reproduces a black-box kernel's outputs (identify_order), and its report.

Searches over the orders of models and confirms every claim through simulate. Imports core and models.
"""
