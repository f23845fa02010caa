"""Errors of the collector, split by what the runner does about them."""

from __future__ import annotations

from routing_gym.errors import RoutingGymError, UsageError


class CollectError(RoutingGymError):
    """The run cannot go on (bad config, storage failure, lost server); the message says why
    and what was kept."""


class ConfigError(CollectError, UsageError, ValueError):
    """A collection config is invalid; the message names the file and the field."""


class StorageError(CollectError):
    """A record could not be written (full disk, read-only folder): the run stops at once."""


class MeterUnavailable(CollectError):
    """The requested energy meter cannot work on this machine (no GPU, no driver, too old)."""


class BackendError(Exception):
    """One generation call failed. ``retryable`` says whether trying again may help."""

    retryable = False
    kind = "error"


class TransientBackendError(BackendError):
    """A server error (5xx, 429), timeout or dropped connection: retry with backoff."""

    retryable = True
    kind = "transient"


class ServerUnreachable(TransientBackendError):
    """Nothing answers at the server address (not started, or died mid-run)."""

    kind = "unreachable"


class MalformedResponse(BackendError):
    """The server answered something that is not a valid response (retried a few times)."""

    retryable = True
    kind = "malformed"


class ModelUnavailable(BackendError):
    """The model is not pulled / not served; retrying will not help."""

    kind = "model_unavailable"
