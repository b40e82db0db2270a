"""``python -m beam_feedback``: the same as the ``beam-feedback`` command."""

from __future__ import annotations

import sys

from beam_feedback.cli import main

if __name__ == "__main__":
    sys.exit(main())
