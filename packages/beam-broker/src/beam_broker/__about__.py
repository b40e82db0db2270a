"""Version of the beam-broker distribution."""

__version__ = "0.1.0"
