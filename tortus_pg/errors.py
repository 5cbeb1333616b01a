"""Exceptions raised by tortus-pg; the CLI and API turn them into clean messages."""


class TortusError(Exception):
    """Base class: the message says what went wrong and what to do."""


class ConfigError(TortusError):
    """A setting is missing or invalid."""


class DatabaseUnavailable(TortusError):
    """The database server cannot be reached or refused the login."""


class DatabaseBusy(TortusError):
    """Other sessions held the locks an operation needs for longer than it waits."""


class ExtensionMissing(TortusError):
    """A required PostgreSQL extension (pgvector) is not installed."""


class SchemaOutdated(TortusError):
    """The database is not at the migration head."""


class PermissionProblem(TortusError):
    """The connecting role lacks a privilege the operation needs."""


class TenantNotFound(TortusError):
    """No tenant with that id exists."""


class InvalidInput(TortusError):
    """User input failed validation."""
