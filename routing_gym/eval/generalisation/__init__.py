"""Routing beyond the training pool: unseen benchmarks (``unseen_benchmarks``), unseen models (``unseen_models``) and pool changes (``pool_change``)."""
