"""Benchmarks: our API against raw SQL on the same database and against peer libraries."""
