"""Serving under load: batch curves, the physics fitted to them, and a discrete-event simulator.

Below the envs (``routing_gym.envs.serving_env`` builds on it), above ``sources`` (ML.ENERGY's
readers and the energy laws). ``curves``: the batch-curve table shared with the collector's
concurrency sweep; ``physics``: time per output token and joules per token against batch size;
``simulator``: model servers with iteration-level continuous batching; ``fidelity``: the checks
against measurements and Little's law.
"""
