"""LAIR front end: grammar, AST, semantic checks, isl lowering, reference interpreter."""
