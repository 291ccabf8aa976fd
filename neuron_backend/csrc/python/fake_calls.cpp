// The arguments arrive as Python objects (a dispatch mode's view of the call); the schema turns them
// into the IValue stack the fallback's accounting reads (shapes, dtypes, devices, scalar values), so a
// fake call and a real one of the same signature hash and print the same.
#include "python/fake_calls.h"

#include "accounting/accounting.h"
#include "common.h"

#include <ATen/ScalarOps.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>

namespace neuron_sim {

// A Python number passed for a Tensor argument (x * 0.5) is, in a real call, a wrapped-number tensor
// (PyTorch's argument parser makes one); make the same so it hashes and prints as a scalar.
static py::object as_wrapped_number(const py::handle& v) {
  c10::Scalar s;
  if (PyBool_Check(v.ptr())) {
    s = c10::Scalar(v.cast<bool>());
  } else if (PyLong_Check(v.ptr())) {
    s = c10::Scalar(v.cast<int64_t>());
  } else if (PyFloat_Check(v.ptr())) {
    s = c10::Scalar(v.cast<double>());
  } else if (PyComplex_Check(v.ptr())) {
    s = c10::Scalar(v.cast<c10::complex<double>>());
  } else {
    return py::reinterpret_borrow<py::object>(v);
  }
  at::Tensor t = c10::scalar_to_tensor(s);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(t)));
}

static bool is_tensor_type(const c10::Argument& a) {
  return a.type()->kind() == c10::TypeKind::TensorType ||
         (a.type()->kind() == c10::TypeKind::OptionalType &&
          a.type()->expectRef<c10::OptionalType>().getElementType()->kind() == c10::TypeKind::TensorType);
}

// A fake tensor answers device() through Python (its impl is a meta tensor whose device is a Python
// property): every query would call back into the interpreter. The accounting reads only sizes,
// strides, dtype and the device type, so it gets a storage-less tensor with those, the device type taken
// from the fake's backend keys (FakeTensor keys its device's backend).
static at::Tensor stand_in(const at::Tensor& t) {
  if (!t.defined() || !t.unsafeGetTensorImpl()->is_python_dispatch()) return t;
  const bool neuron = t.key_set().has_backend(c10::BackendComponent::PrivateUse1Bit);
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::DispatchKeySet(neuron ? c10::DispatchKey::PrivateUse1 : c10::DispatchKey::CPU), t.dtype(),
      neuron ? c10::Device(kNeuron, 0) : c10::Device(c10::kCPU));
  impl->set_sizes_and_strides(t.sizes(), t.strides());
  return at::Tensor(std::move(impl));
}

static void use_stand_ins(torch::jit::Stack& stack) {
  for (auto& v : stack) {
    if (v.isTensor()) {
      v = c10::IValue(stand_in(v.toTensor()));
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> l = v.toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(l.size());
      for (const at::Tensor& t : l) out.push_back(stand_in(t));
      v = c10::IValue(out);
    } else if (v.isList()) {  // Tensor?[] (index)
      c10::List<c10::IValue> l = v.toList();
      c10::List<c10::IValue> out = l.copy();
      for (size_t i = 0; i < out.size(); ++i) {
        c10::IValue e = out.get(i);
        if (e.isTensor()) out.set(i, c10::IValue(stand_in(e.toTensor())));
      }
      v = c10::IValue(out);
    }
  }
}

static torch::jit::Stack stack_of(const c10::OperatorHandle& op, const py::tuple& args, const py::dict& kwargs) {
  const auto& schema = op.schema();
  const auto& formals = schema.arguments();
  py::tuple fixed(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    fixed[i] = (i < formals.size() && is_tensor_type(formals[i])) ? as_wrapped_number(args[i])
                                                                    : py::reinterpret_borrow<py::object>(args[i]);
  py::dict fixed_kwargs;
  for (const auto& a : formals) {
    py::str key(a.name());
    if (kwargs.contains(key))
      fixed_kwargs[key] = is_tensor_type(a) ? as_wrapped_number(kwargs[key]) : py::object(kwargs[key]);
  }
  torch::jit::Stack stack = torch::jit::createStackForSchema(schema, fixed, fixed_kwargs, std::nullopt);
  use_stand_ins(stack);
  return stack;
}

uint64_t account_fake_call(const std::string& name, const std::string& overload, const py::tuple& args,
                           const py::dict& kwargs) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
  return account_without_running(op, stack_of(op, args, kwargs));
}

void account_fake_complex_result(const std::string& name, const std::string& overload, uint64_t hash) {
  if (hash == 0) return;
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
  account_complex_result(op, hash);
}

void account_fake_factory(const std::string& name, const std::string& overload, const py::tuple& args,
                          const py::dict& kwargs) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
  const torch::jit::Stack stack = stack_of(op, args, kwargs);
  const bool strided = name == "aten::empty_strided";  // (size, stride, dtype, ...) or (size, dtype, ...)
  const auto& dtype = stack[strided ? 2 : 1];
  const auto st = dtype.isNone() ? c10::get_default_dtype_as_scalartype() : static_cast<c10::ScalarType>(dtype.toInt());
  std::optional<c10::MemoryFormat> mf;
  if (!strided && !stack[5].isNone()) mf = static_cast<c10::MemoryFormat>(stack[5].toInt());
  const ExplicitOp which = strided ? kOpEmptyStrided : kOpEmpty;
  count_explicit(which);
  check_factory(which, stack[0].toDimVector(), st, mf);
}

}  // namespace neuron_sim
