// Python callbacks of the accounting layer. Never called on the hot path (a repeated signature).
#include <Python.h>

#include "accounting/callbacks.h"

namespace neuron_sim {

static PyObject* g_site_cb = nullptr;
static PyObject* g_unsup_cb = nullptr;

void set_callbacks(PyObject* site_cb, PyObject* unsupported_cb) {
  Py_XINCREF(site_cb);
  Py_XINCREF(unsupported_cb);
  Py_XDECREF(g_site_cb);
  Py_XDECREF(g_unsup_cb);
  g_site_cb = site_cb;
  g_unsup_cb = unsupported_cb;
}

static bool python_ok() { return Py_IsInitialized() && !_Py_IsFinalizing(); }

int capture_site() {
  if (!g_site_cb || !python_ok()) return -1;
  PyGILState_STATE st = PyGILState_Ensure();
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  int site = -1;
  PyObject* r = PyObject_CallNoArgs(g_site_cb);
  if (r) {
    site = static_cast<int>(PyLong_AsLong(r));
    Py_DECREF(r);
  }
  if (PyErr_Occurred()) PyErr_Clear();
  PyErr_Restore(et, ev, tb);
  PyGILState_Release(st);
  return site;
}

bool unsupported_must_raise(const std::string& feature, const std::string& op, const std::string& message) {
  bool raise = true;
  if (g_unsup_cb && python_ok()) {
    PyGILState_STATE st = PyGILState_Ensure();
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject* r = PyObject_CallFunction(g_unsup_cb, "sss", feature.c_str(), op.c_str(), message.c_str());
    if (r) {
      raise = PyObject_IsTrue(r) == 1;
      Py_DECREF(r);
    }
    if (PyErr_Occurred()) PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    PyGILState_Release(st);
  }
  return raise;
}

}  // namespace neuron_sim
