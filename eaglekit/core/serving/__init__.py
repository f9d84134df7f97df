"""Serving maths, pure: the cost model of a target forward (experts touched, roofline, calibration), the
throughput account, the serving plan's arithmetic and its input tables, published target configs.
Builds on :mod:`eaglekit.core.speedup` and :mod:`eaglekit.core.configs`, and the core's shared modules."""
