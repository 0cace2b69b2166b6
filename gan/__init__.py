"""gan package."""
