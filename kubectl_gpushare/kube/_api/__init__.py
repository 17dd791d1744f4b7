"""Generated cel-spec ``cel.expr`` syntax and checked-expression messages (DO NOT EDIT; see regen.py)."""
