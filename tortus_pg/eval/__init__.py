"""Evaluation harness: datasets, metrics and confidence intervals for retrieval strategies."""
