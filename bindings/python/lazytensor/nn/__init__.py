"""`lazytensor.nn`: PyTorch's torch.nn over lazytensor ops (Module, layers, losses, functional,
init, utils). Layers the runtime cannot express yet (Conv2d, pooling, BatchNorm2d,
MultiheadAttention) raise NotImplementedError when constructed."""
from . import functional, init, utils
from .layers import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, BCEWithLogitsLoss,
                     Conv1d, Conv2d, CrossEntropyLoss, Dropout, Embedding, Flatten, GELU, Identity,
                     L1Loss, LayerNorm, LeakyReLU, Linear, LogSoftmax, MaxPool2d, ModuleDict,
                     ModuleList, MSELoss, MultiheadAttention, NLLLoss, ParameterList, ReLU,
                     Sequential, Sigmoid, SiLU, Softmax, Tanh)
from .module import Module
from .parameter import Buffer, Parameter
