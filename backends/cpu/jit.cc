#include "backends/cpu/jit.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/GlobalAlias.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/DynamicLibrary.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/SubtargetFeature.h>
#include <llvm/TargetParser/Triple.h>

#include <atomic>
#include <mutex>

#include "backends/clocks.h"
#include "backends/cpu/sink_broadcasts.h"
#include "backends/cpu/streaming_stores.h"
#include "backends/cpu/vector_variant.h"
#include "ir/error.h"

namespace lt::cpu {
namespace {

std::string to_string(llvm::Error e) { return llvm::toString(std::move(e)); }

struct HostTarget {
  std::string triple, cpu, features, error;
  llvm::StringMap<bool> feature_map;
  const llvm::Target* target = nullptr;
};

const HostTarget& host_target() {
  static const HostTarget* host = [] {
    auto* h = new HostTarget;
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    h->triple = llvm::sys::getProcessTriple();
    h->cpu = llvm::sys::getHostCPUName().str();
    h->feature_map = llvm::sys::getHostCPUFeatures();
    llvm::SubtargetFeatures features;
    for (const auto& f : h->feature_map) features.AddFeature(f.getKey(), f.getValue());
    h->features = features.getString();
    h->target = llvm::TargetRegistry::lookupTarget(h->triple, h->error);
    return h;
  }();
  return *host;
}

std::unique_ptr<llvm::TargetMachine> host_target_machine() {
  const HostTarget& h = host_target();
  if (!h.target)
    fail(ErrorKind::Runtime, "cpu backend: no LLVM target for ", h.triple, ": ", h.error);
  llvm::TargetOptions opts;  // strict IEEE: no unsafe-fp-math, no FMA contraction across ops
  opts.AllowFPOpFusion = llvm::FPOpFusion::Strict;
  std::unique_ptr<llvm::TargetMachine> tm(
      h.target->createTargetMachine(h.triple, h.cpu, h.features, opts, llvm::Reloc::PIC_,
                                    llvm::CodeModel::Small, llvm::CodeGenOptLevel::Aggressive,
                                    /*JIT=*/true));
  if (!tm)
    fail(ErrorKind::Runtime, "cpu backend: cannot create an LLVM target machine for ", h.cpu);
  return tm;
}

// The process-wide JIT. Never destroyed: executables cached in static objects may outlive any
// destructor order we could pick.
struct Jit {
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  llvm::orc::JITDylib* process = nullptr;  // libc/libm symbols (expf, tanhf, memset, ...)
  std::string error;
  std::recursive_mutex mu;  // serializes linking, lookups and removal
  uint64_t next_id = 0;
  std::atomic<int64_t> live{0}, created{0};
};

// libmvec loaded into the process (so the JIT resolves its _ZGV* vector functions), once.
bool have_libmvec() {
  static const bool ok = [] {
    std::string err;
    return !llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1", &err);
  }();
  return ok;
}

Jit& jit() {
  static Jit* j = [] {
    have_libmvec();  // before any object links: compiled and disk-cached code may call into it
    auto* J = new Jit;
    const HostTarget& h = host_target();
    if (!h.target) {
      J->error = "no LLVM target for " + h.triple + ": " + h.error;
      return J;
    }
    llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple(h.triple)};
    jtmb.setCPU(h.cpu);
    llvm::SubtargetFeatures features(h.features);
    jtmb.addFeatures(features.getFeatures());
    jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    jtmb.setRelocationModel(llvm::Reloc::PIC_);
    jtmb.setCodeModel(llvm::CodeModel::Small);
    auto built = llvm::orc::LLJITBuilder()
                     .setJITTargetMachineBuilder(std::move(jtmb))
                     // Kernels need no static initializers or TLS: no platform runtime, and
                     // process symbols come from our own generator below.
                     .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
                     .setLinkProcessSymbolsByDefault(false)
                     .create();
    if (!built) {
      J->error = to_string(built.takeError());
      return J;
    }
    J->lljit = std::move(*built);
    auto& es = J->lljit->getExecutionSession();
    // Failed lookups are reported to the caller as lt::Error; keep stderr quiet.
    es.setErrorReporter([](llvm::Error e) { llvm::consumeError(std::move(e)); });
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        J->lljit->getDataLayout().getGlobalPrefix());
    if (!gen) {
      J->error = to_string(gen.takeError());
      J->lljit.reset();
      return J;
    }
    J->process = &es.createBareJITDylib("lt_process");
    J->process->addGenerator(std::move(*gen));
    return J;
  }();
  if (!j->lljit) fail(ErrorKind::Runtime, "cpu backend: cannot create the LLVM JIT: ", j->error);
  return *j;
}

// Records LLVM errors reported through the context (instead of LLVM's default: exit).
struct DiagnosticCollector : llvm::DiagnosticHandler {
  explicit DiagnosticCollector(std::string* out) : out(out) {}
  bool handleDiagnostics(const llvm::DiagnosticInfo& di) override {
    if (di.getSeverity() == llvm::DS_Error) {
      llvm::raw_string_ostream os(*out);
      llvm::DiagnosticPrinterRawOStream printer(os);
      di.print(printer);
      os << "\n";
    }
    return true;
  }
  std::string* out;
};

void optimize(llvm::Module& m, llvm::TargetMachine& tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, pto);
  // glibc's libmvec gives the loop vectorizer vector sin/cos/exp/log/tanh/erf... (AVX2: 8 floats
  // per call); without it every transcendental is a scalar call and fused chains do not vectorize.
  // Registered before the defaults so ours is the TargetLibraryInfo the passes see.
  llvm::Triple triple(m.getTargetTriple());
  llvm::TargetLibraryInfoImpl tlii(triple);
  if (have_libmvec())
    tlii.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86, triple);
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  // O2, not O3: it vectorizes and interleaves the same (our loops carry explicit interleave
  // counts) and skips O3's extra passes (non-trivial loop unswitching, call-site splitting,
  // argument promotion), which bought our kernels no measurable run time but ~1.6x compile CPU
  // time: train_gpt's step graph 2.3-2.8 s -> 1.4-1.8 s summed over both threads (bench/README.md).
  pb.registerOptimizerLastEPCallback([](llvm::ModulePassManager& mpm, llvm::OptimizationLevel) {
    mpm.addPass(llvm::createModuleToFunctionPassAdaptor(SinkHoistedBroadcastsPass()));
  });
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
  mpm.run(m, mam);
  inline_vector_variants(m);
  stream_stores(m);
}

// Links `objects` into one fresh JITDylib and looks up `names` in it.
std::unique_ptr<JitCode> link_objects(const std::vector<std::string>& objects,
                                      const std::vector<std::string>& names) {
  Jit& J = jit();
  std::lock_guard<std::recursive_mutex> lk(J.mu);
  auto& es = J.lljit->getExecutionSession();
  std::string dylib_name = "lt_plan_";
  dylib_name += std::to_string(J.next_id++);
  auto dylib = es.createJITDylib(dylib_name);
  if (!dylib) fail(ErrorKind::Runtime, "cpu backend: LLVM JIT: ", to_string(dylib.takeError()));
  dylib->addToLinkOrder(*J.process);
  J.live.fetch_add(1);
  J.created.fetch_add(1);
  // From here on `code` owns the JITDylib and removes it on every exit path (the mutex is
  // recursive, so its destructor may run while an error unwinds through this scope).
  auto code = std::make_unique<JitCode>(&*dylib);
  if (!names.empty()) {
    for (size_t i = 0; i < objects.size(); ++i) {
      auto buffer =
          llvm::MemoryBuffer::getMemBufferCopy(objects[i], dylib_name + "." + std::to_string(i));
      if (auto err = J.lljit->addObjectFile(*dylib, std::move(buffer)))
        fail(ErrorKind::Runtime, "cpu backend: LLVM JIT: ", to_string(std::move(err)));
    }
    std::vector<KernelFn> fns;
    for (const auto& name : names) {
      auto sym = J.lljit->lookup(*dylib, name);
      if (!sym) fail(ErrorKind::Runtime, "cpu backend: LLVM JIT: ", to_string(sym.takeError()));
      fns.push_back(sym->toPtr<KernelFn>());
    }
    code->set_functions(std::move(fns));
  }
  return code;
}

}  // namespace

JitCode::~JitCode() {
  if (!dylib_) return;
  Jit& J = jit();
  std::lock_guard<std::recursive_mutex> lk(J.mu);
  llvm::consumeError(J.lljit->getExecutionSession().removeJITDylib(*dylib_));
  J.live.fetch_sub(1);
}

JitStats jit_stats() {
  Jit& J = jit();
  return {J.live.load(), J.created.load()};
}

std::string jit_target_description() {
  const HostTarget& h = host_target();
  return h.cpu + " " + h.triple;
}

std::unique_ptr<JitCode> jit_load_objects(const std::vector<std::string>& objects,
                                          const std::vector<std::string>& names) {
  return link_objects(objects, names);
}

std::string jit_cache_target() {
  const HostTarget& h = host_target();
  std::string s = "llvm " LLVM_VERSION_STRING " ";
  s += h.triple;
  s += " ";
  s += h.cpu;
  s += " ";
  s += h.features;
  return s;
}

bool jit_target_has(const char* feature) {
  const auto& m = host_target().feature_map;
  auto it = m.find(feature);
  return it != m.end() && it->second;
}

void configure_for_host(llvm::Module& m) {
  auto tm = host_target_machine();
  m.setTargetTriple(host_target().triple);
  m.setDataLayout(tm->createDataLayout());
}

std::string jit_compile_object(llvm::Module& m, const std::vector<std::string>& names,
                               std::vector<std::string>* sources, JitTimings* timings) {
  jit();  // fail early, before any work, when the JIT cannot be created
  auto tm = host_target_machine();
  m.setTargetTriple(host_target().triple);
  m.setDataLayout(tm->createDataLayout());
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", tm->getTargetCPU());
    f.addFnAttr("target-features", tm->getTargetFeatureString());
  }
  std::string diag;
  m.getContext().setDiagnosticHandler(std::make_unique<DiagnosticCollector>(&diag));
  {
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(m, &os))
      fail(ErrorKind::Runtime, "cpu backend: internal: invalid LLVM IR: ", os.str());
  }

  auto t0 = SteadyClock::now();
  optimize(m, *tm);
  if (timings) timings->optimize_s = seconds_since(t0);
  if (sources) {
    sources->clear();
    for (const auto& name : names) {
      std::string text;
      llvm::raw_string_ostream os(text);
      if (llvm::Function* f = m.getFunction(name)) {
        f->print(os);
        // The streaming body stays out of line (streaming_stores.h): shown with its wrapper.
        if (llvm::Function* body = m.getFunction(name + ".stream")) body->print(os);
      } else if (llvm::GlobalAlias* a = m.getNamedAlias(name))
        os << "; " << name << ": the same code as " << a->getAliasee()->getName() << "\n";
      sources->push_back(os.str());
    }
  }

  t0 = SteadyClock::now();
  llvm::SmallVector<char, 0> object_code;
  {
    llvm::raw_svector_ostream os(object_code);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
      fail(ErrorKind::Runtime, "cpu backend: LLVM cannot emit object code for ",
           tm->getTargetTriple().str());
    pm.run(m);
  }
  if (!diag.empty()) fail(ErrorKind::Runtime, "cpu backend: LLVM error: ", diag);
  if (timings) timings->codegen_s = seconds_since(t0);

  return std::string(object_code.data(), object_code.size());
}

}  // namespace lt::cpu
