// Source locations of C++ callers: the file:line in the user's code that traced each node (the
// "source" of a trace dump, LT_DEBUG's call sites), as Python callers get theirs from their frames.
//
// Capture costs a stack walk per traced op, so it is off unless debugging asks for it: it is on
// when LT_SOURCE_LOCATIONS=1, LT_DUMP_DIR or LT_DEBUG (non-zero) is set when the library loads, or
// after set_cpp_source_locations(true). Off, tracing runs exactly as without this file (no source
// provider is installed). On, each op walks the stack to the first frame outside the lazytensor
// library and keys on that return address: a call site seen before costs a hash lookup; a new one
// is resolved once to file:line by addr2line (binutils; one child per module, kept running, so the
// debug information is read once; needs the caller built with -g, else the location reads
// "binary+0xoffset"). The Python bindings install their own provider (the Python
// frame), which replaces this one.
#pragma once

namespace lt {

// Turns capture on or off for every thread (off does not replace a provider someone else set).
void set_cpp_source_locations(bool on);
bool cpp_source_locations();

}  // namespace lt
