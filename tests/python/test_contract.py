"""Every Python name of the contract (shared/CONTRACT.md, copied here because CI checks out only this
repository) exists, and every one is exercised by some other test file of this suite (a test that
only checked existence would not cover behaviour)."""
import pathlib
import re

import pytest

import lazytensor as lt

HERE = pathlib.Path(__file__).resolve().parent

CREATION = "tensor zeros ones full empty arange linspace eye rand randn randint zeros_like ones_like full_like " \
           "rand_like randn_like from_numpy from_dlpack manual_seed".split()
DTYPES = "float32 float64 float16 bfloat16 int64 int32 int8 uint8 bool".split()
TENSOR_METHODS = ("shape dtype device ndim numel size dim T mT reshape view permute transpose unsqueeze squeeze "
                  "flatten expand contiguous split chunk sum mean var std max min argmax argmin prod amax amin "
                  "logsumexp softmax log_softmax cumsum exp log sqrt rsqrt sin cos tanh sigmoid relu abs neg pow "
                  "clamp erf floor gather scatter_add index_select masked_fill tril triu to cpu cuda numpy item "
                  "tolist __dlpack__ requires_grad grad backward detach requires_grad_").split()
MODULE_FUNCTIONS = ("cat stack exp matmul where mark_step sync set_lazy_backend compile autocast no_grad "
                    "enable_grad save load").split()
NN = ("Module Parameter Linear Conv2d Embedding LayerNorm BatchNorm2d Dropout ReLU GELU SiLU Tanh Sigmoid Softmax "
      "Sequential ModuleList ModuleDict MaxPool2d AvgPool2d Flatten CrossEntropyLoss MSELoss "
      "MultiheadAttention").split()
MODULE_METHODS = ("parameters named_parameters buffers children state_dict load_state_dict train eval to zero_grad "
                  "__call__").split()
FUNCTIONAL = ("linear relu gelu silu softmax log_softmax cross_entropy nll_loss mse_loss layer_norm dropout "
              "embedding conv2d max_pool2d avg_pool2d scaled_dot_product_attention pad one_hot").split()
OPTIM = "SGD Adam AdamW".split()
SCHEDULERS = "StepLR CosineAnnealingLR".split()
METRICS = "counters last_graph report reset".split()
DEBUG = "ir_text ir_dot kernel_sources dump replay".split()
COUNTER_KEYS = ("traced_ops syncs graph_compiles graph_cache_hits disk_cache_hits kernels_compiled "
                "kernel_launches fallbacks").split()
LAST_GRAPH_KEYS = "hash nodes kernels cache compile_ms run_ms inputs outputs backend".split()


def other_test_sources():
    return "\n".join(p.read_text() for p in HERE.glob("test_*.py") if p.name != "test_contract.py")


SOURCES = other_test_sources()


def used(pattern):
    return re.search(pattern, SOURCES) is not None


@pytest.mark.parametrize("name", CREATION + MODULE_FUNCTIONS)
def test_module_function_exists_and_is_tested(name):
    assert callable(getattr(lt, name)), name
    assert used(rf"lt\.{re.escape(name)}\b"), f"no test calls lt.{name}"


@pytest.mark.parametrize("name", DTYPES)
def test_dtype_exists_and_is_tested(name):
    assert isinstance(getattr(lt, name), lt.dtype)
    assert used(rf"lt\.{name}\b")


@pytest.mark.parametrize("name", TENSOR_METHODS)
def test_tensor_member_exists_and_is_tested(name):
    assert hasattr(lt.Tensor, name), name
    assert used(rf"\.{re.escape(name)}\b"), f"no test uses Tensor.{name}"


@pytest.mark.parametrize("name", NN)
def test_nn_layer_exists_and_is_tested(name):
    assert isinstance(getattr(lt.nn, name), type)
    assert used(rf"nn\.{name}\b"), f"no test uses nn.{name}"


@pytest.mark.parametrize("name", MODULE_METHODS)
def test_module_method_exists_and_is_tested(name):
    assert callable(getattr(lt.nn.Module, name))
    assert name == "__call__" or used(rf"\.{name}\("), f"no test calls Module.{name}"


@pytest.mark.parametrize("name", FUNCTIONAL)
def test_functional_exists_and_is_tested(name):
    assert callable(getattr(lt.nn.functional, name))
    assert used(rf"F\.{name}\b"), f"no test calls F.{name}"


@pytest.mark.parametrize("name", OPTIM)
def test_optimizer_exists_and_is_tested(name):
    opt = getattr(lt.optim, name)
    for m in ("step", "zero_grad", "state_dict", "load_state_dict"):
        assert callable(getattr(opt, m))
    assert used(rf"optim\.{name}\b")


@pytest.mark.parametrize("name", SCHEDULERS)
def test_scheduler_exists_and_is_tested(name):
    assert isinstance(getattr(lt.optim.lr_scheduler, name), type)
    assert used(rf"{name}\b")


@pytest.mark.parametrize("name", METRICS)
def test_metrics_function_exists_and_is_tested(name):
    assert callable(getattr(lt.metrics, name))
    assert used(rf"metrics\.{name}\(")


@pytest.mark.parametrize("name", DEBUG)
def test_debug_function_exists_and_is_tested(name):
    assert callable(getattr(lt.debug, name))
    assert used(rf"debug\.{name}\(")


def test_metrics_keys_and_sync_reasons():
    lt.metrics.reset()
    x = (lt.ones(3, device="lazy") + 1).sum()
    assert x.item() == 6.0
    assert set(COUNTER_KEYS) <= set(lt.metrics.counters())
    assert set(LAST_GRAPH_KEYS) <= set(lt.metrics.last_graph())
    assert lt.metrics.syncs_by_reason()["item"] == 1


def test_helpers_named_by_the_contract():
    assert callable(lt.nn.utils.clip_grad_norm_) and callable(lt.nn.init.kaiming_uniform_)
    assert callable(lt.autograd.grad)
    assert used(r"clip_grad_norm_") and used(r"autograd\.grad\(")
