"""`python -m beam_mcp` is `lean-beam-mcp`."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
