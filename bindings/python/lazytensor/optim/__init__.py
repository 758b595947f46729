"""`lazytensor.optim`: SGD, Adam, AdamW, Adadelta, Adagrad, RMSprop, LBFGS and `lr_scheduler`, with
PyTorch's update rules and API. On a lazy device `optimizer.step()` ends the training step (as
`lt.mark_step()` does)."""
from . import lr_scheduler
from .adadelta_adagrad_rmsprop import Adadelta, Adagrad, RMSprop
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .sgd_adam import SGD, Adam, AdamW
