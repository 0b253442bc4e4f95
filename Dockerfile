# syntax=docker/dockerfile:1
# ASAP image: the bot without jax (the `jax` extra is only for generating real sample runs and
# ahead-of-time compile checks). Multi-stage: wheels are built in one stage, installed into a slim
# runtime that runs as a non-root user with `asap` as the entry point.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY agents ./agents
COPY integrations ./integrations
COPY knowledge ./knowledge
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim AS base
RUN useradd --create-home --uid 10001 asap
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
WORKDIR /app
COPY --chown=asap:asap playbooks ./playbooks
COPY --chown=asap:asap examples ./examples
ENV ASAP_RUNS_DIR=/app/examples/runs \
    ASAP_PLAYBOOKS_DIR=/app/playbooks \
    ASAP_STATE_DIR=/home/asap/.asap \
    PYTHONUNBUFFERED=1
USER asap
ENTRYPOINT ["asap"]
CMD ["runs"]

HEALTHCHECK --interval=30s --timeout=5s --retries=3 CMD ["asap", "--help"]

# Optional target with jax for real sample runs: docker build --target with-jax .
FROM base AS with-jax
USER root
RUN pip install --no-cache-dir "jax[cpu]>=0.4.30"
USER asap

# Default target (last stage): the bot without jax.
FROM base AS runtime
