"""Import a user's module (or ``.py`` file) so the agents and rewards it registers can be named.

Used by the CLI's ``--import`` (any command), by ``compare`` in the driver and in every
worker process or Ray task, and by ``sweep`` configs. The working directory is importable, as
with ``python -m``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from routing_gym.errors import RoutingGymError


def import_user_module(spec: str) -> None:
    """Import ``spec``: a module name (``my_routers``) or a path to a ``.py`` file."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if spec.endswith(".py"):
            if not os.path.exists(spec):
                raise FileNotFoundError(f"no such file: {spec}")
            name = os.path.splitext(os.path.basename(spec))[0]
            if name in sys.modules and getattr(sys.modules[name], "__file__", None) == os.path.abspath(spec):
                return  # already loaded (a worker running a second cell)
            module_spec = importlib.util.spec_from_file_location(name, spec)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            module_spec.loader.exec_module(module)
        else:
            importlib.import_module(spec)
    except Exception as exc:  # the user's module: say which one broke and how, in one line
        raise RoutingGymError(f"--import {spec}: {type(exc).__name__}: {exc}") from None
