"""Experiments and the real-footage benchmark: run each as `python -m experiments.<name>`."""
