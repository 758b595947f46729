// The one oneDNN CPU engine of the process, shared by the GEMM and convolution steps (an inline
// function's static is one object across translation units), and a stream per calling thread.
#pragma once
#ifdef LT_HAVE_ONEDNN
#include <dnnl.hpp>

namespace lt::cpu {

inline dnnl::engine& onednn_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

inline dnnl::stream& onednn_stream() {
  thread_local dnnl::stream stream(onednn_engine());
  return stream;
}

}  // namespace lt::cpu
#endif
