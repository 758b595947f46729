// Slicing, padding, concatenation and index-driven ops, built on the Slice primitive (strided
// views as index arithmetic), on the Gather/ScatterAdd primitives (data-dependent indexing: work
// proportional to the elements read or added, whatever the size of the indexed dimension), and on
// position tensors (cached aranges) compared with indices (one_hot, tril/triu, cumsum, argmax).
// index_select and embedding are gathers with a broadcast index; their gradients scatter_adds.
// Index values are range-checked (IndexError naming the op, the value and the shapes): at the op
// when the index holds host data, at the sync computing the result when the index is computed in
// a pending lazy graph (runtime/index_check.h).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/tensor.h"

namespace lt {

// PyTorch's a[..., start:end:step, ...] along `dim` (start/end clamped, negative from the end).
Tensor slice(const Tensor& a, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
             int64_t step = 1);
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& a, int64_t dim, int64_t index);  // drops `dim`
Tensor flip(const Tensor& a, std::vector<int64_t> dims);
// The primitive: {start, step, size} per dim, every read in bounds.
Tensor slice_prim(const Tensor& a, std::vector<int64_t> start_step_size);
// slice_prim along one dim (`count` elements from `start`, `step` apart), every other dim whole;
// no bounds clamping and no view link (lt::slice does both).
Tensor slice_dim_prim(const Tensor& a, int64_t dim, int64_t start, int64_t step, int64_t count);

// Constant padding of one dim; negative amounts crop.
Tensor pad_dim(const Tensor& a, int64_t dim, int64_t before, int64_t after, double value = 0);
// torch.nn.functional.pad: pads = (last_lo, last_hi, second_last_lo, second_last_hi, ...).
Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, double value = 0);

Tensor cat(const std::vector<Tensor>& ts, int64_t dim);
// One-dimensional tensors of one dtype and device laid end to end, as one concat node (ir/ops.def):
// a DDP bucket's flattened gradients. Lowering writes each piece's producer straight into its
// range of the result when it can (no copy); cat's where chain fuses with its neighbours instead.
Tensor concat(const std::vector<Tensor>& pieces);
Tensor stack(const std::vector<Tensor>& ts, int64_t dim);
std::vector<Tensor> split(const Tensor& a, int64_t size, int64_t dim);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim);

// 0, 1, ..., n-1 as int64 on `device`, cached per (n, device): constant data, never recompiles.
Tensor positions(int64_t n, const Device& device);
// Bool [1, .., total, .., 1] (`total` at `dim` of `rank` dims): true on [begin, begin + n), cached
// per arguments as positions() is.
Tensor range_mask(int64_t total, int64_t dim, int64_t rank, int64_t begin, int64_t n,
                  const Device& device);

Tensor one_hot(const Tensor& index, int64_t num_classes = -1);
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
Tensor embedding(const Tensor& weight, const Tensor& index);
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);
Tensor tril(const Tensor& a, int64_t diagonal = 0);
Tensor triu(const Tensor& a, int64_t diagonal = 0);
Tensor cumsum(const Tensor& a, int64_t dim);
// Index of the first maximum/minimum along dim (all elements flattened when dim is absent), int64.
Tensor argmax(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

}  // namespace lt
