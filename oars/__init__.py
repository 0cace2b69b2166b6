"""oars package."""
