// NVRTC in short-lived child processes. NVRTC compiles scale poorly across the threads of one
// process: on an H100 host (16 cores) a GPT step's 16 programs took 0.52-0.56 s wall on 16 threads
// and 0.31-0.33 s in 16 processes. So when a plan's programs compile in parallel
// (cuda_compile.cc), each goes to a worker, `lazytensor-nvrtc` (tools/lazytensor_nvrtc.cc, built
// next to the library), which reads one request on stdin, compiles it with nvrtc_compiler.h and
// writes one reply on stdout. The worker is spawned (posix_spawn: no fork of a large process),
// costs ~20 ms (exec, NVRTC's load and first-compile setup) and exits after its program.
//
// A worker that cannot be started or that fails for any reason other than the source itself
// (killed, a truncated or malformed reply) is no error: the caller compiles in its own process,
// as without workers. A source NVRTC rejects throws the same lt::Error as in process.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/nvrtc_compiler.h"

namespace lt {

// The worker to run: LT_NVRTC_WORKER when set ("", "0" or "off": none, so every program compiles
// in process), else lazytensor-nvrtc in the directory of the shared object holding this code;
// empty when that is not an executable file.
std::string nvrtc_worker_path();

// `source` compiled for `arch` by one worker: a cubin, or PTX text (no NUL) when !cubin.
// nullopt when there is no worker or it failed (see above); throws lt::Error for compile errors.
// `cpu_s`, if given, receives the worker's CPU time (user + system).
std::optional<std::vector<char>> nvrtc_compile_in_worker(const std::string& source,
                                                         const std::string& arch,
                                                         const std::string& name,
                                                         NvrtcEffort effort, bool cubin,
                                                         double* cpu_s = nullptr);

// One module image of `source` for `target`, as cuModuleLoadData takes it: a cubin, or PTX text
// with its NUL when !cubin; compiled by a worker when `use_worker` and one runs, else on this
// thread. *in_worker (if given) says which; *cpu_s (if given) receives the compile's CPU time
// (the worker's, or this thread's).
std::vector<char> compile_module_image(const std::string& source, const std::string& target,
                                       const std::string& name, NvrtcEffort effort, bool cubin,
                                       bool use_worker, bool* in_worker = nullptr,
                                       double* cpu_s = nullptr);

// The worker's side: reads one request from file descriptor `in` to its end, compiles it and
// writes the reply to `out`. Returns the worker's exit status: 0 when a reply was written (an
// image or a compile error), 2 for a malformed request (nothing written), 3 when the reply could
// not be written.
int serve_nvrtc_request(int in, int out);

}  // namespace lt
