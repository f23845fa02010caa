"""Running agents for the commands: fit and act (``fitting``, ``rollout``), the executors (local, process pool, Ray) and the isolated audit (``audit``, ``audit_process``)."""
