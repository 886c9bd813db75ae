"""Formula engine: predict a model's tensors (and so its counts) from its hyperparameters."""

from .core import Arch, Expected, HParam, Prediction, archs, get, register

__all__ = ["Arch", "Expected", "HParam", "Prediction", "archs", "get", "register"]
