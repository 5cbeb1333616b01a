# syntax=docker/dockerfile:1
#
# PostgreSQL 17 with pgvector 0.8.x (from the base image) and Apache AGE (PGDG's package).
#
# The init scripts in initdb/ run once, when the data volume is empty. They act as the
# administrator of a managed service would: create the owner role `tortus_owner` and the
# database `tortus`, and install the extensions. Everything after that (`tortus-pg db
# upgrade`, the API) runs as the non-superuser owner.
#
# Build context: this directory (docker/).

ARG PGVECTOR_IMAGE=pgvector/pgvector:0.8.0-pg17
FROM ${PGVECTOR_IMAGE}

# The base image is the official postgres image, whose apt sources include the PostgreSQL
# project's repository (apt.postgresql.org); it packages AGE per major as postgresql-<major>-age.
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends "postgresql-${PG_MAJOR}-age"; \
    rm -rf /var/lib/apt/lists/*

COPY initdb/ /docker-entrypoint-initdb.d/

# AGE installs parser and planner hooks, so it must be loaded in every session that runs
# Cypher; preloading it saves each session a LOAD. pgvector needs no preloading.
CMD ["postgres", "-c", "shared_preload_libraries=age"]
