"""Speculative-decoding maths, pure: accept length, break-even and throughput closed forms (Leviathan et
al. 2023) and a Monte Carlo simulation that checks them. Imports only the core's shared modules."""
