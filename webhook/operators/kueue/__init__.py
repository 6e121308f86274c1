"""Kueue plain pod groups."""
