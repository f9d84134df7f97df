"""Checkpoint files, pure: the safetensors header parser, dtypes and the torch dtype bridge, and EAGLE-3
tensor-name normalisation. Imports only the core's shared modules."""
