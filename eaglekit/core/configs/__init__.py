"""Configs, pure: normalising every published drafter config format, the classified config diff, aux
layer ids and what each engine release feeds from them, and what loading a target would do. Imports
only the core's shared modules."""
