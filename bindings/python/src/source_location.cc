// Source locations of traced nodes from Python: the innermost frame outside the lazytensor
// package, as "file.py:line", stamped on each node (trace dumps, bisect, the storm warning).
#include <string>

#include "bindings.h"  // Python.h first, as it must be
#include "ir/node.h"

namespace lt::python {
namespace {

std::string g_package_dir;  // ".../lazytensor/": frames under it are ours, not the user's

int32_t python_source() {
  if (!Py_IsInitialized() || !PyGILState_Check()) return -1;  // a C++ thread without the GIL
  PyFrameObject* f = PyEval_GetFrame();                       // borrowed
  Py_XINCREF(f);
  int32_t id = -1;
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    Py_DECREF(code);
    if (!file) {
      PyErr_Clear();
    } else if (g_package_dir.empty() || std::string_view(file).substr(0, g_package_dir.size()) != g_package_dir) {
      id = intern_source(std::string(file) + ":" + std::to_string(PyFrame_GetLineNumber(f)));
      Py_DECREF(f);
      break;
    }
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
    set_source_provider(&python_source);
  });
}

}  // namespace lt::python
