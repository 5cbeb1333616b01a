"""tortus-pg: Postgres-native retrieval for explainable multi-hop RAG."""

from tortus_pg.config import Settings, load_settings
from tortus_pg.db import connect, database_url, tenant_scope
from tortus_pg.errors import TortusError

__all__ = ["Settings", "TortusError", "connect", "database_url", "load_settings", "tenant_scope"]
__version__ = "0.1.0"
