"""trtls: the TensorRT build panel for the editor."""

__version__ = "0.1.0"
