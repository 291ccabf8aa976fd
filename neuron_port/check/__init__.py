"""The runtime half: run the user's command on the simulated neuron device (optionally on a rewritten
preview copy), read the events the simulator wrote (neuron_backend/EVENTS.md) and turn them into the
report's runtime section and NP9xx findings."""

# here, not in runner.py, so the command line can show it without importing the runtime half
DEFAULT_TIMEOUT_SECONDS = 1800
