// lazytensor's public C++ API. #include <lazytensor/lazytensor.h>, link lazytensor::lazytensor.
#pragma once
#include "runtime/device.h"
#include "ir/error.h"
#include "runtime/autograd.h"
#include "runtime/debug.h"
#include "runtime/indexing.h"
#include "runtime/metrics.h"
#include "runtime/nn.h"
#include "runtime/optim.h"
#include "runtime/ops.h"
#include "runtime/safetensors.h"
#include "runtime/sync.h"
#include "runtime/tensor.h"
