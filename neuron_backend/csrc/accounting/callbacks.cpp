// Python callbacks of the accounting layer. Never called on the hot path (a repeated signature).
//
// The callback pointers are written by set_callbacks() with the GIL held and read by op threads
// (autograd's device threads too) that do not hold it: they are atomic, and a caller re-reads the
// pointer and takes a reference under the GIL before calling it, so a concurrent set_callbacks()
// cannot free the callback while it runs.
#include "accounting/python_compat.h"  // first: includes Python.h

#include "accounting/callbacks.h"

#include <atomic>

namespace neuron_sim {

static std::atomic<PyObject*> g_site_cb{nullptr};
static std::atomic<PyObject*> g_unsup_cb{nullptr};
static std::atomic<PyObject*> g_note_cb{nullptr};

void set_note_callback(PyObject* note_cb) {
  Py_XINCREF(note_cb);
  Py_XDECREF(g_note_cb.exchange(note_cb));
}

void set_callbacks(PyObject* site_cb, PyObject* unsupported_cb) {
  Py_XINCREF(site_cb);
  Py_XINCREF(unsupported_cb);
  Py_XDECREF(g_site_cb.exchange(site_cb));
  Py_XDECREF(g_unsup_cb.exchange(unsupported_cb));
}

// The callback in `slot` with a new reference, or nullptr. Call with the GIL held.
static PyObject* acquire_callback(const std::atomic<PyObject*>& slot) {
  PyObject* cb = slot.load();
  Py_XINCREF(cb);
  return cb;
}

int capture_site() {
  if (!g_site_cb.load(std::memory_order_relaxed) || !python_ok()) return -1;
  PyGILState_STATE st = PyGILState_Ensure();
  int site = -1;
  if (PyObject* cb = acquire_callback(g_site_cb)) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject* r = PyObject_CallNoArgs(cb);
    if (r) {
      site = static_cast<int>(PyLong_AsLong(r));
      Py_DECREF(r);
    }
    if (PyErr_Occurred()) PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    Py_DECREF(cb);
  }
  PyGILState_Release(st);
  return site;
}

bool unsupported_must_raise(const std::string& feature, const std::string& op, const std::string& message) {
  bool raise = true;
  if (g_unsup_cb.load(std::memory_order_relaxed) && python_ok()) {
    PyGILState_STATE st = PyGILState_Ensure();
    if (PyObject* cb = acquire_callback(g_unsup_cb)) {
      PyObject *et, *ev, *tb;
      PyErr_Fetch(&et, &ev, &tb);
      PyObject* r = PyObject_CallFunction(cb, "sss", feature.c_str(), op.c_str(), message.c_str());
      if (r) {
        raise = PyObject_IsTrue(r) == 1;
        Py_DECREF(r);
      }
      if (PyErr_Occurred()) PyErr_Clear();
      PyErr_Restore(et, ev, tb);
      Py_DECREF(cb);
    }
    PyGILState_Release(st);
  }
  return raise;
}

void call_note(const std::string& feature, const std::string& op, const std::string& message,
               const std::string& action) {
  if (!g_note_cb.load(std::memory_order_relaxed) || !python_ok()) return;
  PyGILState_STATE st = PyGILState_Ensure();
  if (PyObject* cb = acquire_callback(g_note_cb)) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject* r = PyObject_CallFunction(cb, "ssss", feature.c_str(), op.c_str(), message.c_str(), action.c_str());
    Py_XDECREF(r);
    if (PyErr_Occurred()) PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    Py_DECREF(cb);
  }
  PyGILState_Release(st);
}

}  // namespace neuron_sim
