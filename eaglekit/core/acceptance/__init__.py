"""The pure half of accept-length measurement: prompt files parsed without I/O. Imports only the core's
shared modules."""
