"""`lazytensor.nn`: PyTorch's torch.nn over lazytensor ops (Module, layers, losses, functional,
init, utils)."""
from . import functional, init, parallel, utils
from .attention import MultiheadAttention
from .layers import (BCEWithLogitsLoss, CrossEntropyLoss, Dropout, Embedding, Flatten, GELU, Identity,
                     L1Loss, LayerNorm, LeakyReLU, Linear, LogSoftmax, ModuleDict, ModuleList, MSELoss,
                     NLLLoss, ParameterList, ReLU, Sequential, Sigmoid, SiLU, Softmax, Tanh)
from .module import Module
from .parameter import Buffer, Parameter
from .recurrent import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase
from .spatial import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, Conv1d, Conv2d,
                      MaxPool2d)
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)
