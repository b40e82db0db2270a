"""Version of the beam-feedback distribution."""

__version__ = "0.1.0"
