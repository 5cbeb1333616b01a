#!/usr/bin/env bash
# First start only (empty data volume): create the owner role and the database, as the
# administrator of a managed service would. Runs as the superuser named by POSTGRES_USER
# over the entrypoint's local socket. The extensions follow in 02-extensions.sql.
set -euo pipefail

: "${TORTUS_OWNER_PASSWORD:?TORTUS_OWNER_PASSWORD must be set for the db service}"

# The password travels as a psql variable and is quoted by psql (:'owner_password'),
# never spliced into the SQL text by the shell.
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v owner_password="$TORTUS_OWNER_PASSWORD" <<'EOSQL'
-- The owner migrates the schema: it owns the database and creates the tortus_app,
-- tortus_analyst and tortus_admin roles (CREATEROLE). It is not a superuser and does
-- not bypass row-level security.
create role tortus_owner login createrole nosuperuser nobypassrls password :'owner_password';
create database tortus owner tortus_owner;
EOSQL
