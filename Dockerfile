# The eval-track code location image: Dagster's gRPC code server for `eval_assets.definitions`, the
# `evaltrack` command, and the project files (scenarios, judges, rubrics, gates) the code location loads.
# Built from the lock files only (the base lock and the k8s group: dagster-k8s and dagster-postgres at
# the pinned Dagster release), byte-compiled at build time, run as a non-root user. docs/deploy.md.
FROM python:3.11.14-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LITELLM_OFFLINE_MODE=true \
    DAGSTER_DISABLE_TELEMETRY=true \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    EVAL_PROJECT_ROOT=/app \
    EVAL_HOME=/data/eval_home \
    DAGSTER_HOME=/opt/dagster/dagster_home

WORKDIR /app

# Dependencies first (a layer that changes only with the lock files); --compile-bytecode: every pod's
# first import does not compile litellm again (PYTHONDONTWRITEBYTECODE stops Python caching it later).
COPY requirements.lock requirements-k8s.lock ./
RUN python -m venv /opt/venv \
 && /opt/venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check uv==0.13.9 \
 && /opt/venv/bin/python -m uv pip sync --no-cache --compile-bytecode --python /opt/venv/bin/python \
      requirements.lock requirements-k8s.lock

# The project: package, configuration and the files the code location and the gates read.
COPY pyproject.toml workspace.yaml evaltrack.yaml README.md ./
COPY eval_assets ./eval_assets
COPY scenarios ./scenarios
COPY judges ./judges
COPY rubrics ./rubrics
COPY gates ./gates
COPY examples ./examples
COPY docs ./docs
COPY tests ./tests
COPY scripts ./scripts
RUN /opt/venv/bin/python -m uv pip install --no-cache --no-deps --python /opt/venv/bin/python -e . \
 && /opt/venv/bin/python -m compileall -q /app/eval_assets \
 && useradd --uid 10001 --user-group --home-dir /home/evaltrack --create-home evaltrack \
 && mkdir -p /data/eval_home /opt/dagster/dagster_home \
 && chown 10001:10001 /data/eval_home /opt/dagster/dagster_home

USER 10001:10001
EXPOSE 3030
CMD ["dagster", "code-server", "start", "--host", "0.0.0.0", "--port", "3030", "--module-name", "eval_assets.definitions"]
