# syntax=docker/dockerfile:1
# ASAP image. Multi-stage: wheels for the bot and its server dependencies are built in `build`; the
# runtime stage installs them offline into a slim Python, runs as a non-root user and is health-checked
# against /healthz of `asap serve` (or of `asap worker`, which serves /healthz on the same ASAP_PORT).
#   docker build -t asap .                        # the bot, no jax (default target)
#   docker build -t asap:jax --target with-jax .  # plus jax, for real sample runs / AOT compile checks
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY bot ./bot
COPY agents ./agents
COPY integrations ./integrations
COPY knowledge ./knowledge
# Shipped inside the wheel as package data (bot/_bundled/, see setup.py): the playbooks the proposal
# engine reads its moves from, and the sample runs (the runs folder when ASAP_RUNS_DIR is not set).
COPY playbooks ./playbooks
COPY examples/runs ./examples/runs
# The runtime's dependencies (aiohttp, redis, prometheus_client, agents, Slack, GitHub) plus the run-store
# clients a team deployment reads runs with (docs/run-stores.md); `--build-arg ASAP_EXTRAS=` leaves them out.
ARG ASAP_EXTRAS=s3,gcs,mlflow
RUN pip wheel --wheel-dir /wheels ".[${ASAP_EXTRAS}]"

FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin asap
COPY --from=build /wheels /wheels
# Offline install from the wheelhouse built above: versions are fixed by that build.
ARG ASAP_EXTRAS=s3,gcs,mlflow
# hadolint ignore=DL3013
RUN pip install --no-index --find-links=/wheels "asap[${ASAP_EXTRAS}]" && rm -rf /wheels
WORKDIR /app
# The wheel carries the playbooks and the sample runs. Mount the team's runs and set ASAP_RUNS_DIR
# (deploy/docker-compose.yml: /runs); a team's own playbooks folder replaces the bundled one with
# ASAP_PLAYBOOKS_DIR.
ENV ASAP_STATE_DIR=/home/asap/.asap \
    ASAP_PORT=8080
USER 10001
EXPOSE 8080
# Stop: SIGTERM -> in-flight jobs get ASAP_GRACE_S (default 8 s) to finish, the rest return to the queue.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=4s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('ASAP_PORT', '8080'), timeout=3)"]
ENTRYPOINT ["asap"]
CMD ["serve", "--all"]

# Optional target with jax for real sample runs: docker build --target with-jax .
FROM base AS with-jax
USER 0
RUN pip install "jax[cpu]>=0.4.30,<0.11"
USER 10001

# Default target (last stage): the bot without jax.
FROM base AS runtime
