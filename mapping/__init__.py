"""Mapping spec front end, polyhedral primitives, task graph and local memory allocation."""
