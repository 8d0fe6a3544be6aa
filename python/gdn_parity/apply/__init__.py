"""Apply the series to a target (a git checkout or an installed package), revert it, status."""
