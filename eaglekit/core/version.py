"""The package version, in the ground floor so that any floor may record it (dump manifests, export notes)."""

__version__ = "0.1.0"
