// Shared by the CPU and GPU donation tests: one run of an executable with a chosen subset of its
// plan's donation candidates donated.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "backends/backend.h"
#include "ir/graph.h"
#include "lowering/plan.h"
#include "runtime/tensor_impl.h"

namespace lt::testing {

// Runs `exe` (compiled from `plan` of `graph` for `be`) on fresh copies of the graph's inputs,
// donating candidate d of plan.donations when bit d of `mask` is set, and returns each root's
// `n` float32 values: read from the input's buffer where that root was donated, whose output the
// executable must then not allocate.
inline std::vector<std::vector<float>> run_with_donations(Backend& be, const Graph& graph,
                                                          const Plan& plan, Executable& exe,
                                                          int mask, int64_t n) {
  std::vector<BufferPtr> bufs(graph.inputs.size());
  std::vector<RunInput> in(graph.inputs.size());
  for (size_t j = 0; j < graph.inputs.size(); ++j) {
    const Node* leaf = graph.inputs[j];
    if (leaf->op == Op::Scalar) {
      in[j].scalar = leaf->scalar;
      in[j].scalar_i = leaf->scalar_i;
      continue;
    }
    const Buffer& src = *static_cast<const Storage*>(leaf->data.get())->buffer;
    std::vector<char> host(src.bytes());
    be.copy_to_host(host.data(), src, src.bytes());
    bufs[j] = be.allocate(src.bytes());
    be.copy_from_host(*bufs[j], host.data(), host.size());
    in[j].buffer = bufs[j].get();
  }
  for (size_t d = 0; d < plan.donations.size(); ++d)
    if (mask & (1 << d))
      in[plan.buffers[plan.donations[d].input].input].donated_output = plan.donations[d].output;
  auto outs = exe.run(in, nullptr);
  std::vector<std::vector<float>> got;
  for (int b : plan.output_buffers) {
    const Buffer* buf = outs.at(b).get();
    for (size_t d = 0; d < plan.donations.size(); ++d)
      if ((mask & (1 << d)) && plan.donations[d].output == b) {
        EXPECT_EQ(buf, nullptr) << be.name() << ": a donated output must not be allocated";
        buf = bufs[plan.buffers[plan.donations[d].input].input].get();
      }
    if (!buf) {
      ADD_FAILURE() << be.name() << ": output buffer " << b << " is missing";
      return got;
    }
    std::vector<float> h(static_cast<size_t>(n));
    be.copy_to_host(h.data(), *buf, h.size() * sizeof(float));
    got.push_back(std::move(h));
  }
  return got;
}

}  // namespace lt::testing
