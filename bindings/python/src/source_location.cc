// Source locations of traced nodes from Python: the innermost frame outside the lazytensor
// package, as "file.py:line", stamped on each node (trace dumps, bisect, the storm warning).
//
// This runs for every node traced from Python (two or three per operator), so the answers are
// memoized: per code object whether it is ours, and per (code object, instruction offset) of a
// user frame its interned location. Without that, each node paid a UTF-8 filename lookup, a line
// table walk, a string build and a locked intern; that was the largest part of a traced op.
#include <cstdint>
#include <string>
#include <unordered_map>

#include "bindings.h"  // Python.h first, as it must be
#include "ir/node.h"

namespace lt::python {
namespace {

std::string g_package_dir;  // ".../lazytensor/": frames under it are ours, not the user's

struct PairHash {
  size_t operator()(const std::pair<const PyCodeObject*, int>& k) const {
    return std::hash<const void*>()(k.first) * 31 + static_cast<size_t>(k.second);
  }
};

// Both maps are read and written with the GIL held. The code objects in `g_ours` are owned (one
// reference each), so an address in either map cannot be reused by another code object while
// cached; the maps are emptied when they grow past a bound (code made at run time, e.g. exec).
std::unordered_map<const PyCodeObject*, bool> g_ours;
std::unordered_map<std::pair<const PyCodeObject*, int>, int32_t, PairHash> g_loc;
constexpr size_t kMaxCodes = 1 << 14;

void clear_caches() {
  for (auto& [code, ours] : g_ours) Py_DECREF(const_cast<PyCodeObject*>(code));
  g_ours.clear();
  g_loc.clear();
}

bool is_ours(PyCodeObject* code) {
  auto it = g_ours.find(code);
  if (it != g_ours.end()) return it->second;
  if (g_ours.size() >= kMaxCodes) clear_caches();
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  if (!file) {
    PyErr_Clear();
    return true;  // no usable file name: skip the frame, as before, without caching it
  }
  bool ours = !g_package_dir.empty() &&
              std::string_view(file).substr(0, g_package_dir.size()) == g_package_dir;
  Py_INCREF(code);
  g_ours.emplace(code, ours);
  return ours;
}

int32_t location_of(PyFrameObject* f, PyCodeObject* code) {
#if PY_VERSION_HEX >= 0x030B0000
  const int offset = PyFrame_GetLasti(f);
#else
  const int offset = PyFrame_GetLineNumber(f);
#endif
  auto [it, fresh] = g_loc.emplace(std::make_pair(code, offset), -1);
  if (fresh) {
    const char* file = PyUnicode_AsUTF8(code->co_filename);  // is_ours() saw it succeed
    it->second = intern_source(std::string(file) + ":" + std::to_string(PyFrame_GetLineNumber(f)));
  }
  return it->second;
}

int32_t python_source() {
  if (!Py_IsInitialized() || !PyGILState_Check()) return -1;  // a C++ thread without the GIL
  PyFrameObject* f = PyEval_GetFrame();                       // borrowed
  Py_XINCREF(f);
  int32_t id = -1;
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    if (!is_ours(code)) {
      id = location_of(f, code);
      Py_DECREF(code);
      Py_DECREF(f);
      break;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(f);  // new reference
    Py_DECREF(f);
    f = back;
  }
  return id;
}

}  // namespace

void init_source_locations(py::module_& m) {
  // Called by lazytensor/__init__.py with its own directory (the module has no __file__ yet
  // while it initializes); only then are nodes stamped.
  m.def("_set_package_dir", [](const std::string& dir) {
    g_package_dir = dir.empty() || dir.back() == '/' ? dir : dir + "/";
    clear_caches();  // which code is ours depends on the directory
    set_source_provider(&python_source);
  });
}

}  // namespace lt::python
