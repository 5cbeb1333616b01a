"""Ingestion: documents in, a typed concept graph out."""
