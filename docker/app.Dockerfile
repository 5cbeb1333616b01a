# syntax=docker/dockerfile:1
#
# The tortus-pg application image: the package installed with pip, migrating the database
# on start and then serving the API.
#
# Build context: the repository root (compose.yaml sets it to `..`).

ARG PYTHON_IMAGE=python:3.11-slim
FROM ${PYTHON_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# README.m[d] matches README.md when it exists and nothing otherwise, so the build does not
# depend on it (pyproject.toml names it as the long description).
COPY pyproject.toml README.m[d] ./
COPY tortus_pg/ tortus_pg/
COPY api/ api/
COPY cli/ cli/
COPY migrations/ migrations/
COPY sql/ sql/
RUN pip install . && rm -rf /src

RUN useradd --create-home --home-dir /home/tortus --shell /usr/sbin/nologin tortus
USER tortus
WORKDIR /home/tortus
# The workspace (tortus.toml, .tortus/). TORTUS_DATABASE_URL must be set: without it the
# CLI would start an embedded server inside the container instead of using the db service.
ENV TORTUS_HOME=/home/tortus

EXPOSE 8000

# Migrate (a no-op at head; it also re-applies the SQL functions), then serve.
CMD ["sh", "-c", "tortus-pg db upgrade && exec tortus-pg serve --host 0.0.0.0 --port 8000"]
