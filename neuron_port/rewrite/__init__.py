"""The static half: discover files, run the rule engine (Python, notebooks, launch files) in worker
processes, cache results by content, and write what changed atomically. Never imports torch."""
