"""Formula engine: predict a model's tensors (and so its counts) from its hyperparameters."""

from .core import Arch, HParam, Prediction, archs, expected, get, register

__all__ = ["Arch", "expected", "HParam", "Prediction", "archs", "get", "register"]
