# syntax=docker/dockerfile:1
#
# PostgreSQL 17 with pgvector 0.8.x (from the base image) and Apache AGE built from source.
#
# The init scripts in initdb/ run once, when the data volume is empty. They act as the
# administrator of a managed service would: create the owner role `tortus_owner` and the
# database `tortus`, and install the extensions. Everything after that (`tortus-pg db
# upgrade`, the API) runs as the non-superuser owner.
#
# Build context: this directory (docker/).

ARG PGVECTOR_IMAGE=pgvector/pgvector:0.8.7-pg17
FROM ${PGVECTOR_IMAGE}

# Apache AGE publishes one release line per PostgreSQL major, tagged PG<major>/v<version>-rc0
# (the -rc0 tag is the release). Keep the major in step with the base image.
ARG AGE_REF=PG17/v1.7.0-rc0

# Build dependencies are removed again in the same layer. `with_llvm=no` skips the JIT
# bitcode, which would need a clang matching the server's LLVM build. Non-superusers may
# LOAD libraries only from $libdir/plugins, so age.so is linked there too: the owner role
# can then run LOAD '$libdir/plugins/age' where a session needs it explicitly.
RUN set -eux; \
    apt-get update; \
    apt-mark hold locales; \
    apt-get install -y --no-install-recommends \
        bison build-essential ca-certificates flex git perl "postgresql-server-dev-${PG_MAJOR}"; \
    git clone --depth 1 --branch "${AGE_REF}" https://github.com/apache/age.git /tmp/age; \
    make -C /tmp/age with_llvm=no; \
    make -C /tmp/age with_llvm=no install; \
    libdir="$(pg_config --pkglibdir)"; \
    mkdir -p "${libdir}/plugins"; \
    ln -sf ../age.so "${libdir}/plugins/age.so"; \
    rm -rf /tmp/age; \
    apt-get purge -y --auto-remove \
        bison build-essential flex git "postgresql-server-dev-${PG_MAJOR}"; \
    apt-mark unhold locales; \
    rm -rf /var/lib/apt/lists/*

COPY initdb/ /docker-entrypoint-initdb.d/

# AGE installs parser and planner hooks, so it must be loaded in every session that runs
# Cypher; preloading it saves each session a LOAD. pgvector needs no preloading.
CMD ["postgres", "-c", "shared_preload_libraries=age"]
