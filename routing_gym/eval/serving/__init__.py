"""Evaluation of routing policies under load (``RoutingGym/Serving-v0``): ``policies`` and
``evaluate`` (paired episodes on common arrival seeds, bootstrap intervals, family-wise verdicts);
``routing-gym serve`` is its command."""
