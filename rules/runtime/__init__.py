"""NP9xx: runtime findings of `neuron-port check`, recorded by the simulated neuron device.

These rules do not visit source code: the aggregators of `check` (``neuron_port/check/aggregate/``) turn
simulator events into findings with these codes, finding the rules through the registry (``rule_by_code``).
Each carries the same registry entry as a static rule (docs, severity, effort), and its examples are
*scripts*: INVALID ones must produce the finding when run under the simulator, VALID ones must not
(tests/rules/test_runtime_rules.py runs them). None has a fix.

Codes (stable), and the module that holds each rule:

- NP901 ``cpu-fallback`` (``fallbacks_and_shapes``): an op fell back to the CPU.
- NP902 ``eager-shape-variance`` (``fallbacks_and_shapes``): an op kept getting new shapes after warm-up.
- NP903 ``compile-recompiles`` (``compilation``): a compiled function was compiled more than once.
- NP904 ``recompile-limit`` (``compilation``): a compiled function hit Dynamo's recompile limit.
- NP905 ``float64-demotion`` (``precision_and_features``): a float64 tensor reached the device.
- NP906 ``unsupported-feature`` (``precision_and_features``): a feature TorchNeuron does not support.
- NP907 ``distributed-constraint`` (``distributed_and_command``): a collective or a process-group setup
  the ``neuron`` backend does not support.
- NP908 ``compile-failure`` (``compilation``): a graph failed to compile for neuron.
- NP909 ``command-failed`` (``distributed_and_command``): the checked command did not finish successfully.
- NP910 ``uneven-last-batch`` (``fallbacks_and_shapes``): a smaller last batch compiled the step's ops
  once more.
- NP911 ``shape-only-placeholder`` (``shape_only``): a shape-only run read a value it did not compute, or
  sized a data-dependent op at its upper bound.
- NP912 ``lost-records`` (``lost_records``): device work the counts miss (the events folder removed, a forked
  child that used the device).
- NP913 ``no-device-work`` (``no_device_work``): the command succeeded with no op on the neuron device, at the
  line that chose the CPU when the run shows one (made after the scan: check/aggregate/no_device_work.py).
"""
