"""edge_hf: real-time fall detection with hyperframes (T frames stacked on the channel axis)."""

__version__ = "0.1.0"
