"""evaluate: score a candidate model against the current champion on the same evaluation set."""
