"""Cycle-level, event-driven simulator of a PE mesh running dtg's PE programs."""
