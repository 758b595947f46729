"""What the PyTorch-bridge tests need from the environment beyond torch itself.

timm imports torchvision. PyPI's torchvision for torch 2.13 (0.28.0, requirements-nodeps.txt) is
built against CUDA torch: its C++ ops library cannot load beside the CPU wheel, and its Python
package then fails at import, registering fake kernels for two ops the library would have defined
(torchvision::nms, torchvision::qnms). Declaring those two schemas first lets its Python parts
import; the models the tests build (timm's ResNet) call no torchvision op, and calling one raises
PyTorch's "no kernel" error rather than computing anything.
"""
import torch


def allow_torchvision_import():
    """Lets `import torchvision` (and so transformers and timm) succeed; see above. With a CUDA
    torch (the GPU machine's) torchvision's library loads and defines the ops itself."""
    if torch.version.cuda is not None:
        return
    try:
        torch.ops.torchvision.nms  # noqa: B018  (defined when torchvision's library loaded)
    except (AttributeError, RuntimeError):
        lib = torch.library.Library("torchvision", "DEF")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        allow_torchvision_import.lib = lib  # keep the definitions alive


def import_timm():
    allow_torchvision_import()
    import timm
    return timm
