// CPython compatibility for the calls into Python (CPython 3.10 - 3.13).
#pragma once

#include <Python.h>

namespace neuron_sim {

// True while the interpreter shuts down: C++ must not call into Python then (taking the GIL
// during finalisation ends the thread). CPython 3.13 made Py_IsFinalizing() public and removed the
// private _Py_IsFinalizing() that 3.10 - 3.12 have.
inline bool py_is_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Python can be called: initialised and not finalising.
inline bool python_ok() { return Py_IsInitialized() && !py_is_finalizing(); }

}  // namespace neuron_sim
