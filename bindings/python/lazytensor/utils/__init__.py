"""`lazytensor.utils`: PyTorch's torch.utils helpers (`lt.utils.data`)."""
from . import data

__all__ = ["data"]
