// NVRTC in child processes. NVRTC compiles scale poorly across the threads of one process: on an
// H100 host (16 cores) a GPT step's 16 programs took 0.52-0.56 s wall on 16 threads and 0.31-0.33
// s in 16 processes forked from one that had NVRTC loaded and warm. So when a plan's programs
// compile in parallel (cuda_compile.cc), each goes to a child of a fork server: the worker
// executable `lazytensor-nvrtc --server` (tools/lazytensor_nvrtc.cc, built next to the library),
// spawned once per process (posix_spawn: no fork of the large caller), loads NVRTC, compiles
// once to warm it, and forks a child per request, which reads the request from its socket,
// compiles it with nvrtc_compiler.h, writes the reply and exits. (A freshly spawned worker per
// program was slower than threads: each paid NVRTC's cold start, 16 at once.)
//
// A server that cannot be started or a child that fails for any reason other than the source
// itself (killed, a truncated or malformed reply) is no error: the caller compiles in its own
// process, as without workers. A source NVRTC rejects throws the same lt::Error as in process.
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

// Starts the fork server now, if there is a worker, so that it is loaded and warm by the first
// compile (the CUDA backend calls this when it opens its device); compiles start it otherwise.
void start_nvrtc_workers();

// `source` compiled for `arch` by one worker: a cubin, or PTX text (no NUL) when !cubin.
// nullopt when there is no worker or it failed (see above); throws lt::Error for compile errors.
// `cpu_s`, if given, receives the worker child's CPU time (user + system).
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

// The fork server's loop (`lazytensor-nvrtc --server`, its control socket on fd `control`):
// warms NVRTC, then forks one child per socket received (SCM_RIGHTS) that serves one request on
// it; returns 0 when the control socket closes.
int run_nvrtc_server(int control);

// The worker's side: reads one request from file descriptor `in` to its end, compiles it and
// writes the reply to `out`. Returns the worker's exit status: 0 when a reply was written (an
// image or a compile error), 2 for a malformed request (nothing written), 3 when the reply could
// not be written.
int serve_nvrtc_request(int in, int out);

}  // namespace lt
