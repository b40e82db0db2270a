"""Version of the beam-mcp distribution."""

__version__ = "0.1.0"
