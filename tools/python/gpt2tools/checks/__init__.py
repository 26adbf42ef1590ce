"""Self-checks of the formats and the converter; each module exits non-zero on a failure."""
