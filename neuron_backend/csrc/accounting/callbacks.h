// Calls into Python (slow path only): the site callback (once per new signature) and the
// unsupported-feature callback. Both are set from Python with set_callbacks().
#pragma once

#include <string>

struct _object;  // PyObject (`typedef struct _object PyObject` in every CPython); no Python.h here

namespace neuron_sim {

// Replace both callbacks (nullptr: none). Called from Python with the GIL held.
void set_callbacks(_object* site_cb, _object* unsupported_cb);
// The user's site id for a new signature, or -1 (no callback, Python finalising, error).
int capture_site();
// Ask Python whether an unsupported feature must raise (true) or is only recorded (false).
// True when there is no callback or Python cannot be called.
bool unsupported_must_raise(const std::string& feature, const std::string& op, const std::string& message);
// The note callback (set_note_callback; neuron_backend/unsupported.py): records a non-raising
// feature event with its action. Called once per new signature.
void set_note_callback(_object* note_cb);
void call_note(const std::string& feature, const std::string& op, const std::string& message,
               const std::string& action);

}  // namespace neuron_sim
