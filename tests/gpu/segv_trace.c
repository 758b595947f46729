/* LD_PRELOAD helper for the GPU machine (no gdb there): prints a native backtrace on
 * SIGSEGV/SIGABRT. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>
static void on_signal(int sig) {
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}
__attribute__((constructor)) static void install(void) {
  signal(SIGSEGV, on_signal);
  signal(SIGABRT, on_signal);
}
