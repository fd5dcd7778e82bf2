"""Benchmarks: `make bench` measures Pauta beside its peers, in one run, on one PostgreSQL."""
