"""Recovery independence (issue 4 §2): what a restore still needs from the system it is meant to replace."""
