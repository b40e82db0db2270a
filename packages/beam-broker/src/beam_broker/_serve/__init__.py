"""Sharing one broker among many agents and projects: admission control, Lean memory, the budget and idle timeout.

Below the core, not a room: the broker and the runtime import it, and it imports only the core's leaves
(`config`, `errors`, `_outbound`; the runtime's type for annotations).
"""
