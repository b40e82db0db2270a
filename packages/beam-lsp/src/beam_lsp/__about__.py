"""Version of the beam-lsp distribution."""

__version__ = "0.1.0"
