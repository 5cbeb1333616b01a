"""Alembic environment: the URL comes from tortus-pg settings, never from an ini file."""

from alembic import context
from sqlalchemy import create_engine, text

from tortus_pg.config import load_settings
from tortus_pg.db import connect, database_url
from tortus_pg.schema import VERSION_SCHEMA, include_name, include_object, metadata

config = context.config
options = dict(
    target_metadata=metadata,
    version_table_schema=VERSION_SCHEMA,
    include_schemas=True,
    include_name=include_name,
    include_object=include_object,
)

if context.is_offline_mode():
    context.configure(url="postgresql://", literal_binds=True, **options)
    with context.begin_transaction():
        context.execute(f"create schema if not exists {VERSION_SCHEMA}")
        context.run_migrations()
else:
    url = config.attributes.get("url") or database_url(load_settings())
    engine = create_engine("postgresql+psycopg://", creator=lambda: connect(url))
    with engine.connect() as connection:
        connection.execute(text(f"create schema if not exists {VERSION_SCHEMA}"))
        context.configure(connection=connection, **options)
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    engine.dispose()
